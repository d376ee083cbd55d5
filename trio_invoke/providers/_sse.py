"""Server-sent events, sans-IO: bytes in, events out. No Trio, no sockets.

:class:`SSEParser` follows the event-stream interpretation of the WHATWG HTML standard
(section 9.2.6): lines end with CRLF, LF or CR; ``data`` lines accumulate and join with ``\\n``;
a line starting with ``:`` is a comment; a blank line dispatches the event; an event with no
``data`` line is not dispatched; ``id`` and ``retry`` set the parser's state; a leading BOM is
dropped. Feed it the body in pieces of any size, split anywhere -- mid-line, between CR and LF,
inside a UTF-8 character -- and it yields the same events as for the whole body at once::

    parser = SSEParser()
    for piece in body_pieces:
        for event in parser.feed(piece):
            handle(event.data)

An event is held in memory until the blank line that ends it: one that grows past
``max_event_size`` bytes without ending (a line with no line end, endless ``data`` lines) sets
:attr:`SSEParser.too_large`, for the caller to stop reading, rather than growing without bound.
"""

from __future__ import annotations

import re

import attrs

__all__ = ["MAX_EVENT_SIZE", "SSEParser", "ServerSentEvent"]

MAX_EVENT_SIZE = 16 * 1024 * 1024
"""Bytes an event may hold before it ends (its lines so far): 16 MiB, far beyond any chunk a
model server sends (they are a few hundred bytes; a whole tool call's arguments at most)."""

_BOM = b"\xef\xbb\xbf"
_END_OF_LINE = re.compile(rb"\r\n|\r|\n")


@attrs.frozen
class ServerSentEvent:
    """One dispatched event."""

    data: str
    """The event's ``data`` lines, joined with ``"\\n"``."""
    event: str = "message"
    """The ``event`` field, ``"message"`` when the event had none."""
    id: str = ""
    """The last event id the stream set (``id`` fields persist across events)."""


class SSEParser:
    """An incremental parser of a ``text/event-stream`` body.

    Attributes:
        last_event_id: The last ``id`` field seen (``""`` before any).
        retry: The last valid ``retry`` field (milliseconds), ``None`` before any.
        max_event_size: The most bytes the event being read may hold (its unended line and its
            ``data`` lines so far).
        too_large: The event being read holds more than ``max_event_size`` bytes: stop feeding
            (the events :meth:`feed` returned before are whole and good).
    """

    __slots__ = (
        "_after_cr",
        "_data",
        "_data_size",
        "_event",
        "_partial",
        "_partial_size",
        "_started",
        "last_event_id",
        "max_event_size",
        "retry",
        "too_large",
    )

    def __init__(self, max_event_size: int = MAX_EVENT_SIZE) -> None:
        self._partial: list[bytes] = []  # bytes of the current line, no terminator yet
        self._partial_size = 0
        self._after_cr = False  # the last piece ended with CR: an LF next completes a CRLF
        self._started = False  # the BOM check is done
        self._data: list[str] = []
        self._data_size = 0  # bytes of the current event's data lines
        self._event = ""
        self.last_event_id = ""
        self.retry: int | None = None
        self.max_event_size = max_event_size
        self.too_large = False

    @property
    def in_event(self) -> bool:
        """Whether the stream so far ends inside an event: a line or a ``data`` field that no
        blank line has dispatched yet. Per the standard such an event is dropped at the end."""
        return bool(self._partial or self._data)

    def feed(self, piece: bytes) -> list[ServerSentEvent]:
        """Parse the next ``piece`` of the body; return the events it completes, in order."""
        if not piece:
            return []
        data = self.lone_message(piece)  # what a server that flushes each event sends
        if data is not None:
            return [ServerSentEvent(data, "message", self.last_event_id)]
        if self._after_cr:
            self._after_cr = False
            if piece[:1] == b"\n":
                piece = piece[1:]
                if not piece:
                    return []
        if not self._started:
            head = b"".join(self._partial) + piece
            if len(head) < len(_BOM) and _BOM.startswith(head):
                self._partial = [head]  # could still be a BOM: wait for more
                self._partial_size = len(head)
                return []
            self._started = True
            self._partial = []
            self._partial_size = 0
            piece = head.removeprefix(_BOM)
        if b"\n" not in piece and b"\r" not in piece:
            self._partial.append(piece)  # no line ends here: no join, no copy
            self._partial_size += len(piece)
            if self._partial_size + self._data_size > self.max_event_size:
                self.too_large = True
            return []
        buffer = b"".join(self._partial) + piece if self._partial else piece
        if b"\r" in buffer:
            return self._lines(buffer)
        return self._lf_lines(buffer)

    def lone_message(self, piece: bytes) -> str | None:
        """The data of ``piece`` if it is one whole event alone: a single ``data`` line and a
        blank line, between two events, with no ``event`` field before it -- what a server that
        flushes each event sends, nearly every time. The parser's state is then as
        :meth:`feed` leaves it, and :meth:`feed` would have returned
        ``[ServerSentEvent(data, "message", self.last_event_id)]``: this is that, without the
        event and the list. ``None`` otherwise, with nothing changed: feed the piece then."""
        if (
            piece[-2:] == b"\n\n"
            and piece[:6] == b"data: "
            and self._started
            and not self._partial
            and not self._data
            and not self._event
            and not self._after_cr
        ):
            value = piece[6:-2]
            if b"\n" not in value and b"\r" not in value:
                return value.decode("utf-8", errors="replace")
        return None

    def _lf_lines(self, buffer: bytes) -> list[ServerSentEvent]:
        """The events of ``buffer``, whose lines end with LF only (the common path)."""
        # Only LF line ends (what servers send): split, and read the ``data: `` lines (nearly
        # all of them) here; the other lines take the general path of :meth:`_line`.
        lines = buffer.split(b"\n")
        tail = lines.pop()
        self._partial = [tail] if tail else []
        events: list[ServerSentEvent] = []
        data = self._data
        size = self._data_size
        for raw in lines:
            if raw[:6] == b"data: ":
                data.append(raw[6:].decode("utf-8", errors="replace"))
                size += len(raw)
            elif raw:
                self._data_size = size
                self._line(raw)
                size = self._data_size
            elif data:  # a blank line: dispatch
                events.append(
                    ServerSentEvent("\n".join(data), self._event or "message", self.last_event_id)
                )
                data = self._data = []
                size = 0
                self._event = ""
            else:
                self._event = ""  # an event with no data is not dispatched
        self._data_size = size
        self._partial_size = len(tail)
        if size + len(tail) > self.max_event_size:
            self.too_large = True
        return events

    def _lines(self, buffer: bytes) -> list[ServerSentEvent]:
        """The events of ``buffer``, whose lines end with CR, LF or CRLF (the general path)."""
        events: list[ServerSentEvent] = []
        start = 0
        for match in _END_OF_LINE.finditer(buffer):
            event = self._line(buffer[start : match.start()])
            if event is not None:
                events.append(event)
            start = match.end()
        if start == len(buffer) and buffer.endswith(b"\r"):
            self._after_cr = True
        self._partial = [buffer[start:]] if start < len(buffer) else []
        self._partial_size = len(buffer) - start
        if self._partial_size + self._data_size > self.max_event_size:
            self.too_large = True
        return events

    def _line(self, raw: bytes) -> ServerSentEvent | None:
        if not raw:
            return self._dispatch()
        line = raw.decode("utf-8", errors="replace")
        if line.startswith(":"):
            return None  # a comment (servers send them as keep-alives)
        field, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
            self._data_size += len(raw)
        elif field == "event":
            self._event = value
        elif field == "id":
            if "\0" not in value:
                self.last_event_id = value
        elif field == "retry" and value.isascii() and value.isdigit():
            self.retry = int(value)
        return None  # unknown fields are ignored

    def _dispatch(self) -> ServerSentEvent | None:
        data, event = self._data, self._event
        self._data, self._event = [], ""
        self._data_size = 0
        if not data:
            return None
        return ServerSentEvent("\n".join(data), event or "message", self.last_event_id)
