"""The sans-IO SSE parser: the event-stream rules, and split invariance (Hypothesis)."""

from __future__ import annotations

import copy
import hashlib
import itertools
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from recorded import SOURCES, STREAMS, recorded

from trio_invoke.providers._sse import ServerSentEvent, SSEParser


def parse(*pieces: bytes) -> list[ServerSentEvent]:
    parser = SSEParser()
    events: list[ServerSentEvent] = []
    for piece in pieces:
        events += parser.feed(piece)
    return events


def data_of(*pieces: bytes) -> list[str]:
    return [event.data for event in parse(*pieces)]


def test_data_lines_dispatch_on_a_blank_line() -> None:
    assert parse(b'data: {"a": 1}\n\ndata: [DONE]\n\n') == [
        ServerSentEvent('{"a": 1}'),
        ServerSentEvent("[DONE]"),
    ]


def test_multi_line_data_joins_with_newlines() -> None:
    assert data_of(b"data: one\ndata: two\ndata:\ndata:  three\n\n") == ["one\ntwo\n\n three"]


def test_only_one_leading_space_is_dropped_and_no_space_is_fine() -> None:
    assert data_of(b"data:x\n\ndata:   y\n\n") == ["x", "  y"]


def test_comments_and_unknown_fields_are_ignored() -> None:
    stream = b": keep-alive\n: OPENROUTER PROCESSING\nfoo: bar\ndata: hi\nnonsense\n\n"
    assert data_of(stream) == ["hi"]


def test_a_comment_alone_dispatches_nothing() -> None:
    assert parse(b": ping\n\n: ping\n\n") == []


def test_an_event_without_data_is_not_dispatched_and_resets_its_type() -> None:
    assert parse(b"event: ping\n\ndata: x\n\n") == [ServerSentEvent("x", "message")]


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
def test_every_line_ending(eol: bytes) -> None:
    stream = eol.join([b"event: delta", b"data: a", b"data: b", b"", b"data: c", b"", b""])
    assert parse(stream) == [ServerSentEvent("a\nb", "delta"), ServerSentEvent("c")]


def test_crlf_split_between_cr_and_lf_is_one_line_end() -> None:
    assert data_of(b"data: a\r", b"\n\r", b"\ndata: b\r\n\r\n") == ["a", "b"]
    # The LF after a CR that ended the last piece is not a second (blank) line: that would
    # dispatch "a" on its own and start a new event for "b".
    assert data_of(b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n") == ["a\nb"]


CRLF_EVENTS = (
    b"event: delta\r\ndata: a\r\ndata: b\r\n\r\n"
    b": keep-alive\r\ndata: c\r\ndata:\r\ndata: d\r\n\r\n"
    b"id: 7\r\ndata: e\r\n\r\n"
)
CRLF_EXPECTED = [
    ServerSentEvent("a\nb", "delta"),
    ServerSentEvent("c\n\nd"),
    ServerSentEvent("e", id="7"),
]


def test_crlf_events_with_several_data_lines_cut_anywhere() -> None:
    assert parse(CRLF_EVENTS) == CRLF_EXPECTED
    for cut in range(1, len(CRLF_EVENTS)):
        assert parse(CRLF_EVENTS[:cut], CRLF_EVENTS[cut:]) == CRLF_EXPECTED, cut


def test_crlf_events_cut_after_every_cr() -> None:
    pieces = CRLF_EVENTS.replace(b"\r", b"\r\0").split(b"\0")  # every piece ends with CR
    assert all(piece.endswith(b"\r") for piece in pieces[:-1])
    assert parse(*pieces) == CRLF_EXPECTED
    assert parse(*(CRLF_EVENTS[i : i + 1] for i in range(len(CRLF_EVENTS)))) == CRLF_EXPECTED


def test_lone_cr_at_the_end_of_a_piece_is_a_line_end() -> None:
    assert data_of(b"data: a\r", b"\r", b"data: b\r\r") == ["a", "b"]
    # A CR ending a piece, then a piece that does not start with LF: the next line is whole.
    assert data_of(b"data: a\r", b"data: b\r", b"\r") == ["a\nb"]


def test_id_persists_and_retry_is_read() -> None:
    parser = SSEParser()
    events = parser.feed(b"id: 7\nretry: 1500\ndata: a\n\ndata: b\n\nid\ndata: c\n\n")
    assert [(e.data, e.id) for e in events] == [("a", "7"), ("b", "7"), ("c", "")]
    assert parser.retry == 1500
    assert parser.last_event_id == ""


def test_invalid_retry_and_id_with_nul_are_ignored() -> None:
    parser = SSEParser()
    parser.feed(b"retry: 1.5\nid: a\x00b\ndata: x\n\n")
    assert parser.retry is None
    assert parser.last_event_id == ""


def test_a_leading_bom_is_dropped_even_when_split() -> None:
    assert data_of(b"\xef", b"\xbb", b"\xbfdata: x\n\n") == ["x"]
    assert data_of(b"\xef\xbb\xbf\xef\xbb\xbfdata: x\n\n") == []  # only one BOM is dropped
    assert data_of(b"\xef\xbb\xbfdata: x\n\n") == ["x"]


def test_utf8_split_inside_a_character() -> None:
    raw = "data: café ☕ 日本\n\n".encode()
    cut = raw.index("☕".encode()) + 1
    assert data_of(raw[:cut], raw[cut:]) == ["café ☕ 日本"]


def test_invalid_utf8_is_replaced_not_raised() -> None:
    assert data_of(b"data: \xff\xfe ok\n\n") == ["\ufffd\ufffd ok"]


def test_an_unterminated_event_is_not_dispatched_and_is_reported() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: [DONE]") == []
    assert parser.in_event
    assert parser.feed(b"\n") == []
    assert parser.in_event  # a data field still waits for its blank line
    assert parser.feed(b"\n") == [ServerSentEvent("[DONE]")]
    assert not parser.in_event


def test_empty_pieces_change_nothing() -> None:
    assert data_of(b"", b"data: a\r", b"", b"\n", b"", b"\n") == ["a"]


# -- split invariance ---------------------------------------------------------------------------

field_text = st.text(
    st.characters(blacklist_categories=["Cs"], blacklist_characters="\r\n\x00"), max_size=20
)
line_ending = st.sampled_from([b"\n", b"\r\n", b"\r"])


@st.composite
def event_streams(draw: st.DrawFn) -> tuple[bytes, list[ServerSentEvent]]:
    """A stream of events with a random line ending, comments and field spellings, and the
    events it encodes. (One ending per stream: a CR line end followed by an LF one would be a
    single CRLF.)"""
    eol = draw(line_ending)
    out: list[bytes] = []
    expected: list[ServerSentEvent] = []
    if draw(st.booleans()):
        out.append(b"\xef\xbb\xbf")
    for _ in range(draw(st.integers(0, 5))):
        event_type = draw(st.one_of(st.none(), field_text.filter(lambda t: t != "")))
        lines = draw(st.lists(field_text, min_size=1, max_size=3))
        if draw(st.booleans()):
            out += [b": " + draw(field_text).encode(), eol]
        if event_type is not None:
            out += [b"event: " + event_type.encode(), eol]
        for line in lines:
            colon = draw(st.sampled_from([b"data:", b"data: "]))
            if colon == b"data:" and line.startswith(" "):
                colon = b"data: "  # "data: " + " x" keeps the second space; "data:" would not
            out += [colon + line.encode(), eol]
        out.append(eol)
        expected.append(ServerSentEvent("\n".join(lines), event_type or "message"))
    return b"".join(out), expected


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *sorted(c % (len(data) + 1) for c in cuts), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


@given(event_streams(), st.lists(st.integers(0, 10_000), max_size=12))
def test_any_split_of_an_encoded_stream_gives_its_events(
    stream: tuple[bytes, list[ServerSentEvent]], cuts: list[int]
) -> None:
    raw, expected = stream
    assert parse(*split(raw, cuts)) == expected


@given(st.binary(max_size=200), st.lists(st.integers(0, 10_000), max_size=12))
def test_any_split_of_any_bytes_gives_the_same_events_as_the_whole(
    raw: bytes, cuts: list[int]
) -> None:
    whole = SSEParser()
    expected = whole.feed(raw)
    pieces = SSEParser()
    events = [event for piece in split(raw, cuts) for event in pieces.feed(piece)]
    assert events == expected
    assert (pieces.last_event_id, pieces.retry, pieces.in_event) == (
        whole.last_event_id,
        whole.retry,
        whole.in_event,
    )


@given(st.binary(max_size=120))
def test_byte_at_a_time_equals_the_whole(raw: bytes) -> None:
    assert parse(*(raw[i : i + 1] for i in range(len(raw)))) == parse(raw)


# -- lone_message: the fast path for one event alone in its piece --------------------------------

_STATE = ("_after_cr", "_data", "_data_size", "_event", "_partial", "_partial_size", "_started")

fragments = st.sampled_from(
    [
        b"data: x\n\n",
        b'data: {"a": 1}\n\n',
        b"data: \n\n",
        b"data:x\n\n",
        b"data: two\n\ndata: events\n\n",
        b"data: a\rb\n\n",
        b"data: a\n",
        b"data: tail",
        b"\n",
        b"\r",
        b"\r\n",
        b"event: named\n",
        b"event: error\n",
        b"id: 7\n",
        b"retry: 5\n",
        b": keep-alive\n\n",
        b"\xef\xbb",
        b"\xef\xbb\xbf",
        b"data: \xc3\n\n",
    ]
)
pieces_of_events = st.lists(st.one_of(fragments, st.binary(max_size=12)), max_size=16)


def state_of(parser: SSEParser) -> list[object]:
    """The parser's state, copied (its lists change in place)."""
    return [copy.copy(getattr(parser, name)) for name in _STATE]


def feed_with_lone_message(parser: SSEParser, piece: bytes) -> list[ServerSentEvent]:
    """What ``SSEStream`` does with a piece: the fast path, else :meth:`SSEParser.feed`."""
    data = parser.lone_message(piece)
    if data is None:
        return parser.feed(piece)
    return [ServerSentEvent(data, "message", parser.last_event_id)]


@given(pieces_of_events)
def test_lone_message_then_feed_is_feed(pieces: list[bytes]) -> None:
    fast, plain = SSEParser(), SSEParser()
    for piece in pieces:
        assert feed_with_lone_message(fast, piece) == plain.feed(piece)
        assert state_of(fast) == state_of(plain)
    assert (fast.last_event_id, fast.retry, fast.too_large) == (
        plain.last_event_id,
        plain.retry,
        plain.too_large,
    )


@given(event_streams(), st.lists(st.integers(0, 10_000), max_size=12))
def test_lone_message_on_any_split_of_an_encoded_stream(
    stream: tuple[bytes, list[ServerSentEvent]], cuts: list[int]
) -> None:
    raw, expected = stream
    parser = SSEParser()
    events = [e for piece in split(raw, cuts) for e in feed_with_lone_message(parser, piece)]
    assert events == expected


@pytest.mark.parametrize(
    ("before", "piece"),
    [
        (b"", b"data: x\n\n"),  # the first piece: the BOM check is feed's
        (b"data: a\r", b"data: x\n\n"),  # inside an event, after a CR
        (b"data: a\n\n\r", b"data: x\n\n"),  # after a CR alone: an LF first would end it
        (b"event: named\n", b"data: x\n\n"),  # the event has a type
        (b"data: a\n", b"data: x\n\n"),  # inside an event: its data comes first
        (b"data: a\n\ndata: par", b"data: x\n\n"),  # a line not ended yet
        (b"data: a\n\n", b"data: x\n\ndata: y\n\n"),  # two events
        (b"data: a\n\n", b"data: x\ry\n\n"),  # a CR inside
        (b"data: a\n\n", b"data: x\n"),  # not ended
        (b"data: a\n\n", b"event: e\ndata: x\n\n"),  # a field before data
        (b"data: a\n\n", b"data:x\n\n"),  # no space: feed's to read
    ],
)
def test_lone_message_declines_and_changes_nothing(before: bytes, piece: bytes) -> None:
    parser = SSEParser()
    parser.feed(before)
    state = state_of(parser)
    assert parser.lone_message(piece) is None
    assert state_of(parser) == state


def test_lone_message_takes_one_whole_event_between_events() -> None:
    parser = SSEParser()
    parser.feed(b"id: 9\ndata: a\n\n")
    assert parser.lone_message(b'data: {"b": "\xc3\xa9"}\n\n') == '{"b": "\u00e9"}'
    assert parser.lone_message(b"data: \xff\n\n") == "\ufffd"  # replaced, as feed does
    assert parser.last_event_id == "9"


# -- the recorded streams: where each came from, and that each is an event stream ------------


def test_every_file_of_the_recorded_data_is_listed() -> None:
    files = {str(p.relative_to(STREAMS)) for p in STREAMS.rglob("*") if p.is_file()}
    assert files - {"SOURCES.json"} == set(SOURCES)


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_every_recorded_file_has_its_source(name: str) -> None:
    source = SOURCES[name]
    repository, path, commit = source["repository"], source["path"], source["commit"]
    assert source["source"] == f"https://github.com/{repository}/blob/{commit}/{path}"
    assert len(commit) == 40
    assert int(commit, 16) >= 0
    assert source["license"] in ("MIT", "Apache-2.0")
    assert source["license_source"]
    assert source["transformations"]
    raw = recorded(name)
    assert (len(raw), hashlib.sha256(raw).hexdigest()) == (source["bytes"], source["sha256"])
    if name.endswith(".json"):
        assert isinstance(json.loads(raw), dict)


@pytest.mark.parametrize("name", sorted(n for n in SOURCES if n.endswith(".sse")))
def test_every_recorded_stream_is_events_of_json_whatever_the_cut(name: str) -> None:
    raw = recorded(name)
    events = parse(raw)
    assert events
    for event in events:
        assert event.data == "[DONE]" or isinstance(json.loads(event.data), dict)
    assert parse(*(raw[i : i + 1] for i in range(len(raw)))) == events


# -- an event that never ends -------------------------------------------------------------------


@given(event_streams(), st.lists(st.integers(0, 10_000), max_size=12))
def test_events_within_the_limit_never_are_too_large(
    stream: tuple[bytes, list[ServerSentEvent]], cuts: list[int]
) -> None:
    # What an event holds before it ends is at most the bytes of its lines (and of the comments
    # before it), line ends aside: a limit at that size is never crossed, whatever the cuts.
    raw, expected = stream
    held = [len(block) - block.count(b"\n") - block.count(b"\r") for block in _events_of(raw)]
    parser = SSEParser(max_event_size=max(held, default=0))
    events = [event for piece in split(raw, cuts) for event in parser.feed(piece)]
    assert events == expected
    assert not parser.too_large


def _events_of(raw: bytes) -> list[bytes]:
    """``raw`` cut at its blank lines (any line ending), each piece an event with what comes
    before it."""
    lines = raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
    blocks, current = [], b""
    for line in lines:
        if line:
            current += line
        else:
            blocks.append(current)
            current = b""
    return [*blocks, current]


@pytest.mark.parametrize("size", [1, 7, 4096])
@pytest.mark.parametrize(
    "endless",
    [
        b"data: " + b"x" * 100_000,  # one line with no line end
        b"data: x\n" * 20_000,  # data lines and no blank line
        b"data: x\r" * 20_000,
        b": keep-alive " + b"y" * 100_000,  # a comment with no line end
        b"event: " + b"z" * 100_000,
    ],
    ids=["line", "data lines", "cr data lines", "comment", "event field"],
)
def test_an_event_that_does_not_end_is_too_large_past_the_limit(endless: bytes, size: int) -> None:
    limit = 50_000
    parser = SSEParser(max_event_size=limit)
    before = b'data: {"ok": 1}\n\n'
    fed = 0
    events: list[ServerSentEvent] = []
    for piece in [
        before + endless[:size],
        *(endless[i : i + size] for i in range(size, len(endless), size)),
    ]:
        events += parser.feed(piece)
        fed += len(piece)
        if parser.too_large:
            break
    assert parser.too_large
    assert [event.data for event in events] == ['{"ok": 1}']  # what ended before is whole
    held = endless[: fed - len(before)].replace(b"\n", b"").replace(b"\r", b"")
    assert len(held) <= limit + size + 8  # stopped as the limit was crossed (line ends aside)


def test_the_default_limit_is_16_mib() -> None:
    parser = SSEParser()
    assert parser.max_event_size == 16 * 1024 * 1024
    parser.feed(b"data: " + b"x" * (16 * 1024 * 1024 - 6))
    assert not parser.too_large
    parser.feed(b"x")
    assert parser.too_large
