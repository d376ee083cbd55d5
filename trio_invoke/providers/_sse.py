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
"""

from __future__ import annotations

import re

import attrs

__all__ = ["SSEParser", "ServerSentEvent"]

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
    """

    __slots__ = (
        "_after_cr",
        "_data",
        "_event",
        "_partial",
        "_started",
        "last_event_id",
        "retry",
    )

    def __init__(self) -> None:
        self._partial: list[bytes] = []  # bytes of the current line, no terminator yet
        self._after_cr = False  # the last piece ended with CR: an LF next completes a CRLF
        self._started = False  # the BOM check is done
        self._data: list[str] = []
        self._event = ""
        self.last_event_id = ""
        self.retry: int | None = None

    @property
    def in_event(self) -> bool:
        """Whether the stream so far ends inside an event: a line or a ``data`` field that no
        blank line has dispatched yet. Per the standard such an event is dropped at the end."""
        return bool(self._partial or self._data)

    def feed(self, piece: bytes) -> list[ServerSentEvent]:
        """Parse the next ``piece`` of the body; return the events it completes, in order."""
        if not piece:
            return []
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
                return []
            self._started = True
            self._partial = []
            piece = head.removeprefix(_BOM)
        if not self._partial and piece[-2:] == b"\n\n" and piece[:6] == b"data: ":
            value = piece[6:-2]
            if b"\n" not in value and b"\r" not in value and not self._data:
                # One whole event of one data line, alone in its piece: what a server that
                # flushes each event sends, nearly every time.
                event = ServerSentEvent(
                    value.decode("utf-8", errors="replace"),
                    self._event or "message",
                    self.last_event_id,
                )
                self._event = ""
                return [event]
        if b"\n" not in piece and b"\r" not in piece:
            self._partial.append(piece)  # no line ends here: no join, no copy
            return []
        buffer = b"".join(self._partial) + piece if self._partial else piece
        if b"\r" in buffer:
            return self._lines(buffer)
        # Only LF line ends (what servers send): split, and read the ``data: `` lines (nearly
        # all of them) here; the other lines take the general path of :meth:`_line`.
        lines = buffer.split(b"\n")
        tail = lines.pop()
        self._partial = [tail] if tail else []
        events: list[ServerSentEvent] = []
        data = self._data
        for raw in lines:
            if raw[:6] == b"data: ":
                data.append(raw[6:].decode("utf-8", errors="replace"))
            elif raw:
                self._line(raw)
            elif data:  # a blank line: dispatch
                events.append(
                    ServerSentEvent("\n".join(data), self._event or "message", self.last_event_id)
                )
                data = self._data = []
                self._event = ""
            else:
                self._event = ""  # an event with no data is not dispatched
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
        if not data:
            return None
        return ServerSentEvent("\n".join(data), event or "message", self.last_event_id)
