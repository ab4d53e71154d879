"""One HTTP/1.1 response read strictly from bytes (for the client's core, `clankie.clientcore`).

Owns how the client reads what comes back on a connection: a pure state machine over bytes,
fed whatever the socket gives in pieces of any size, that says when a whole response has
come. The status line and headers (bounded in bytes and in number), a body by
Content-Length, chunked or up to the close (bounded in bytes), interim 1xx responses skipped.
Anything else raises `Malformed`: bare LF line ends, folded or invalid header lines,
conflicting or non-numeric lengths, a transfer coding other than chunked, a bad chunk size,
a close before the end. It does no I/O and decides nothing about what the body means.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["MAX_BODY", "MAX_HEAD", "Malformed", "Response", "ResponseParser"]

MAX_HEAD = 64 * 1024  # the status line and headers together (and the trailers)
MAX_HEADERS = 100
MAX_BODY = 64 * 1024 * 1024
MAX_CHUNK_LINE = 1024  # a chunk's size line, extensions included
MAX_INTERIM = 8  # 1xx responses before the final one

_STATUS = re.compile(rb"HTTP/1\.([01]) ([1-9][0-9][0-9])(?: [\t\x20-\x7e\x80-\xff]*)?")
# Linear in the line's length: the value is matched greedily and its trailing blanks are
# stripped after (a lazy value before `[ \t]*` backtracks, quadratic in a run of blanks).
_HEADER = re.compile(rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*([\t\x20-\x7e\x80-\xff]*)")
_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]{1,15})[ \t]*(?:;[\t\x20-\x7e\x80-\xff]*)?")


class Malformed(Exception):
    """What came is not a whole, well-formed HTTP/1.x response within the bounds."""


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str]  # names in lower case; a repeated header's values joined by ", "
    body: bytes
    keep_alive: bool  # the connection may carry another request


class ResponseParser:
    """Feed it bytes (`feed`) and the end of the stream (`feed_eof`); either returns the
    response once it is whole (None while more is needed), or raises `Malformed`."""

    def __init__(self, max_body: int = MAX_BODY) -> None:
        self._max_body = max_body
        self._buf = bytearray()
        self._scanned = 0  # how far the buffer was searched for the end of the head
        self._state = "head"
        self._interim = 0
        self._status = 0
        self._headers: dict[str, str] = {}
        self._keep_alive = False
        self._body = bytearray()
        self._left = 0  # bytes of the body (or of the current chunk) still to come
        self._trailer_bytes = 0
        self._done: Response | None = None

    def feed(self, data: bytes) -> Response | None:
        if self._done is not None:
            if data:
                raise Malformed("bytes came after the whole response")
            return self._done
        self._buf += data
        self._advance()
        return self._done

    def feed_eof(self) -> Response:
        if self._done is not None:
            return self._done
        if self._state == "until_close":
            self._finish(keep_alive=False)
            assert self._done is not None
            return self._done
        raise Malformed("the connection closed before the whole response came"
                        + (" (nothing came)" if self._state == "head" and not self._buf
                           and not self._interim else ""))

    # ------------------------------------------------------------------ the machine

    def _advance(self) -> None:
        while self._done is None:
            before = (self._state, len(self._buf))
            getattr(self, f"_on_{self._state}")()
            if (self._state, len(self._buf)) == before:
                return  # needs more bytes

    def _finish(self, keep_alive: bool) -> None:
        if self._buf:  # more than the response: nothing asked for it
            keep_alive = False
        self._done = Response(self._status, self._headers, bytes(self._body),
                              keep_alive and self._keep_alive)
        self._state = "done"

    def _on_head(self) -> None:
        end = self._buf.find(b"\r\n\r\n", max(0, self._scanned - 3))
        if end < 0:
            self._scanned = len(self._buf)
            if len(self._buf) > MAX_HEAD:
                raise Malformed(f"the response's head is longer than {MAX_HEAD} bytes")
            return
        if end + 4 > MAX_HEAD:
            raise Malformed(f"the response's head is longer than {MAX_HEAD} bytes")
        head = bytes(self._buf[:end])
        del self._buf[:end + 4]
        self._scanned = 0
        self._read_head(head.split(b"\r\n"))

    def _read_head(self, lines: list[bytes]) -> None:
        status = _STATUS.fullmatch(lines[0])
        if status is None:
            raise Malformed(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
        if len(lines) - 1 > MAX_HEADERS:
            raise Malformed(f"more than {MAX_HEADERS} headers")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            field = _HEADER.fullmatch(line)
            if field is None:
                raise Malformed(f"not a header line: {line[:80]!r}")
            name = field[1].decode("ascii").lower()
            value = field[2].rstrip(b" \t").decode("latin-1")
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        code = int(status[2])
        if 100 <= code < 200:
            if code == 101:
                raise Malformed("the server switched protocols, which nothing asked for")
            self._interim += 1
            if self._interim > MAX_INTERIM:
                raise Malformed(f"more than {MAX_INTERIM} interim responses")
            return  # another head follows
        self._status, self._headers = code, headers
        http11 = status[1] == b"1"
        tokens = {t.strip().lower() for t in headers.get("connection", "").split(",")}
        self._keep_alive = http11 and "close" not in tokens
        coding = headers.get("transfer-encoding")
        length = headers.get("content-length")
        if code in (204, 304):
            self._finish(keep_alive=True)
        elif coding is not None:
            if length is not None:
                raise Malformed("both Transfer-Encoding and Content-Length")
            if not http11 or coding.strip().lower() != "chunked":
                raise Malformed(f"a transfer coding other than chunked: {coding[:40]!r}")
            self._state = "chunk_size"
        elif length is not None:
            self._left = self._content_length(length)
            self._state = "body"
        else:
            self._keep_alive = False
            self._state = "until_close"

    def _content_length(self, text: str) -> int:
        values = {v.strip() for v in text.split(",")}
        if len(values) != 1:
            raise Malformed(f"conflicting Content-Length: {text[:40]!r}")
        value = values.pop()
        if not (value.isascii() and value.isdigit()) or len(value) > 15:
            raise Malformed(f"not a Content-Length: {value[:40]!r}")
        if int(value) > self._max_body:
            raise Malformed(f"a body of {value} bytes, more than {self._max_body}")
        return int(value)

    def _take(self, most: int) -> None:
        taken = self._buf[:most]
        del self._buf[:most]
        self._body += taken
        self._left -= len(taken)

    def _on_body(self) -> None:
        self._take(self._left)
        if self._left == 0:
            self._finish(keep_alive=True)

    def _on_until_close(self) -> None:
        if len(self._body) + len(self._buf) > self._max_body:
            raise Malformed(f"a body of more than {self._max_body} bytes")
        self._body += self._buf
        self._buf.clear()

    def _line(self, limit: int) -> bytes | None:
        end = self._buf.find(b"\r\n", 0, limit + 2)
        if end < 0:
            if len(self._buf) >= limit + 2:
                raise Malformed(f"a line longer than {limit} bytes")
            return None
        line = bytes(self._buf[:end])
        del self._buf[:end + 2]
        if b"\r" in line or b"\n" in line:
            raise Malformed("a bare CR or LF in a line")
        return line

    def _on_chunk_size(self) -> None:
        line = self._line(MAX_CHUNK_LINE)
        if line is None:
            return
        size = _CHUNK_SIZE.fullmatch(line)
        if size is None:
            raise Malformed(f"not a chunk size: {line[:40]!r}")
        self._left = int(size[1], 16)
        if len(self._body) + self._left > self._max_body:
            raise Malformed(f"a body of more than {self._max_body} bytes")
        self._state = "chunk_data" if self._left else "trailer"

    def _on_chunk_data(self) -> None:
        self._take(self._left)
        if self._left == 0:
            self._state = "chunk_end"

    def _on_chunk_end(self) -> None:
        if len(self._buf) < 2:
            if self._buf and self._buf != b"\r":
                raise Malformed("a chunk not followed by CRLF")
            return
        if self._buf[:2] != b"\r\n":
            raise Malformed("a chunk not followed by CRLF")
        del self._buf[:2]
        self._state = "chunk_size"

    def _on_trailer(self) -> None:
        before = len(self._buf)
        line = self._line(MAX_HEAD)
        if line is None:
            return
        self._trailer_bytes += before - len(self._buf)
        if self._trailer_bytes > MAX_HEAD:
            raise Malformed(f"trailers longer than {MAX_HEAD} bytes")
        if not line:
            self._finish(keep_alive=True)
        elif _HEADER.fullmatch(line) is None:
            raise Malformed(f"not a trailer line: {line[:80]!r}")
