"""Server-sent events framing, exactly as the WHATWG HTML standard parses an event stream.

Bytes in, ``(event type, data)`` out. What providers really send, and the standard allows:

* lines ending in ``\\n``, ``\\r\\n`` or a lone ``\\r`` (a ``\\r\\n`` may be split across two reads);
* ``data:`` with or without the one space after the colon; several ``data:`` lines in one event,
  joined with ``\\n``; an ``event:`` name; ``id:``, ``retry:`` and unknown fields, ignored (we never
  reconnect); ``:`` comments (a gateway's ``: PROCESSING`` keep-alive), ignored;
* a UTF-8 byte order mark before the first line;
* events split across reads anywhere, mid-line or inside a UTF-8 character: the parser works on bytes
  and only splits at CR and LF, which never occur inside a multi-byte character.

Deviation from the standard, on purpose: at the end of the body an event still waiting for its blank
line is dispatched, not dropped. Several gateways close the connection right after the last
``data:`` line, and that line is usually the one that carries ``finish_reason`` or ``usage``.
"""

from __future__ import annotations

from collections.abc import Callable

BOM = b"\xef\xbb\xbf"

#: ``(event type, data)``: the type is ``b""`` when no ``event:`` field named it ("message").
Dispatch = Callable[[bytes, bytes], None]


class SSEFramer:
    """Feed it the body as it arrives; it calls ``dispatch`` once per complete event, in order."""

    __slots__ = ("_data", "_event", "_skip_lf", "_started", "_tail", "dispatch", "recognized")

    def __init__(self, dispatch: Dispatch) -> None:
        self.dispatch = dispatch
        #: lines that were SSE (data, event, id, retry, comments): none in a body means it was no event stream
        self.recognized = 0
        self._tail = b""  #: an unfinished line
        self._skip_lf = False  #: the last read ended in CR: an LF first in the next read belongs to it
        self._data: list[bytes] = []
        self._event = b""
        self._started = False  #: the BOM check is done

    def feed(self, data: bytes) -> None:
        if self._tail:
            data = self._tail + data
            self._tail = b""
        elif self._skip_lf:
            self._skip_lf = False
            if data[:1] == b"\n":
                data = data[1:]
        if not self._started:
            if len(data) < len(BOM) and BOM.startswith(data):
                self._tail = data  # too short to tell yet
                return
            self._started = True
            if data.startswith(BOM):
                data = data[len(BOM) :]
        lines = data.splitlines(keepends=True)  # on bytes: LF, CRLF and CR only
        if lines:
            last = lines[-1]
            if last[-1:] not in (b"\n", b"\r"):
                self._tail = lines.pop()
            elif last[-1:] == b"\r":
                self._skip_lf = True
        for line in lines:
            self._line(line.rstrip(b"\r\n"))

    def close(self) -> None:
        """The body ended: the last line and the last event, even without their terminators."""
        if self._tail:
            tail, self._tail = self._tail, b""
            if not self._started and BOM.startswith(tail):
                tail = b""
            if tail:
                self._line(tail)
        self._line(b"")

    def _line(self, line: bytes) -> None:
        if line[:5] == b"data:":  # by far the most common line: straight to the buffer
            self.recognized += 1
            self._data.append(line[6:] if line[5:6] == b" " else line[5:])
            return
        if not line:
            if self._data:
                data = b"\n".join(self._data)
                event = self._event
                self._data = []
                self._event = b""
                self.dispatch(event, data)
            else:
                self._event = b""
            return
        if line[:1] == b":":
            self.recognized += 1
            return  # a comment
        name, colon, value = line.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            self.recognized += 1
            self._data.append(value)
        elif name == b"event":
            self.recognized += 1
            self._event = value
        elif name in (b"id", b"retry"):
            self.recognized += 1
        elif name == b"error" and value:
            self.recognized += 1
            # Not a standard field, but a gateway that writes one means it: hand it on as an error event.
            self._data.append(value)
            self._event = b"error"
