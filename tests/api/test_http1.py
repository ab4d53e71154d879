"""`clankie.http1`, the client's response parser (issue 19): whatever the bytes and however
they are split, it returns the response or raises `Malformed`, never anything else."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from clankie.http1 import MAX_BODY, MAX_HEAD, MAX_HEADERS, Malformed, Response, ResponseParser

OK_JSON = (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 16\r\n\r\n"
           b'{"answer": true}')
CHUNKED = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
           b"5\r\nhello\r\n1;ext=1\r\n \r\n5\r\nworld\r\n0\r\nX-Trailer: yes\r\n\r\n")


def parse(*pieces: bytes, eof: bool = True, max_body: int = MAX_BODY) -> Response | None:
    """Feed `pieces` one after another (and the end of the stream, if `eof`)."""
    parser = ResponseParser(max_body)
    response = None
    for piece in pieces:
        response = parser.feed(piece)
    return parser.feed_eof() if eof and response is None else response


def outcome(*pieces: bytes, eof: bool = True) -> Response | str | None:
    """The response, or "malformed"; anything else the parser raises fails the test."""
    try:
        return parse(*pieces, eof=eof)
    except Malformed:
        return "malformed"


def test_a_content_length_response():
    response = parse(OK_JSON, eof=False)
    assert response == Response(200, {"content-type": "application/json",
                                      "content-length": "16"}, b'{"answer": true}', True)


def test_a_chunked_response_with_extensions_and_trailers():
    response = parse(CHUNKED, eof=False)
    assert response is not None
    assert (response.status, response.body, response.keep_alive) == (200, b"hello world", True)


@pytest.mark.parametrize("whole", [OK_JSON, CHUNKED,
                                   b"HTTP/1.1 100 Continue\r\n\r\n" + OK_JSON,
                                   b"HTTP/1.1 204 No Content\r\nServer: x\r\n\r\n"])
def test_split_at_every_byte_boundary_and_byte_by_byte_it_reads_the_same(whole: bytes):
    expected = parse(whole, eof=False)
    assert expected is not None
    for cut in range(len(whole) + 1):
        assert parse(whole[:cut], whole[cut:], eof=False) == expected, cut
    assert parse(*(whole[i:i + 1] for i in range(len(whole))), eof=False) == expected


@pytest.mark.parametrize("whole", [OK_JSON, CHUNKED])
def test_a_close_anywhere_before_the_end_is_malformed(whole: bytes):
    for cut in range(len(whole)):
        with pytest.raises(Malformed):
            parse(whole[:cut])


def test_a_body_up_to_the_close_ends_with_it_and_keeps_no_connection():
    response = parse(b"HTTP/1.1 200 OK\r\n\r\n", b"all ", b"of it")
    assert response == Response(200, {}, b"all of it", False)


@pytest.mark.parametrize(("head", "keep"), [
    (b"HTTP/1.1 200 OK\r\nConnection: close\r\n", False),
    (b"HTTP/1.1 200 OK\r\nConnection: Keep-Alive, Close\r\n", False),
    (b"HTTP/1.0 200 OK\r\n", False),
    (b"HTTP/1.1 200\r\n", True),
])
def test_whether_the_connection_may_be_kept(head: bytes, keep: bool):
    response = parse(head + b"Content-Length: 2\r\n\r\n{}", eof=False)
    assert response is not None and response.keep_alive is keep


def test_bytes_after_the_response_keep_no_connection():
    response = parse(OK_JSON + b"HTTP/1.1 200 OK\r\n", eof=False)
    assert response is not None and not response.keep_alive


@pytest.mark.parametrize("bad", [
    b"",  # nothing at all
    b"garbage\r\n\r\n",
    b"HTTP/2 200 OK\r\n\r\n",
    b"HTTP/1.1 20 OK\r\n\r\n",
    b"HTTP/1.1 200 OK\nContent-Length: 0\n\n",  # bare LF
    b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n folded\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nX: a\x00b\r\nContent-Length: 0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 0x10\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\nx",
    b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx",
    b"HTTP/1.1 200 OK\r\nContent-Length: " + b"9" * 400 + b"\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
    b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    b"HTTP/1.1 101 Switching Protocols\r\n\r\n",
    b"HTTP/1.1 100 Continue\r\n\r\n" * 9 + OK_JSON,
])
def test_malformed_heads_are_refused(bad: bytes):
    with pytest.raises(Malformed):
        parse(bad)


@pytest.mark.parametrize("chunks", [
    b"zz\r\nhello\r\n0\r\n\r\n",  # not hex
    b"-5\r\nhello\r\n0\r\n\r\n",
    b"\r\nhello\r\n0\r\n\r\n",  # no size
    b"5\r\nhelloXX0\r\n\r\n",  # data not followed by CRLF
    b"5\r\nhello\r\n" + b"f" * 16 + b"\r\n",  # a size beyond any bound
    b"5" + b";x" * 600 + b"\r\nhello\r\n0\r\n\r\n",  # a size line beyond its bound
    b"5\nhello\r\n0\r\n\r\n",  # bare LF
    b"0\r\nnot a trailer\r\n\r\n",
    b"3\r\nabc\r\n",  # closed before the last chunk
])
def test_bad_chunks_are_refused(chunks: bytes):
    with pytest.raises(Malformed):
        parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks)


def test_bounds_on_the_head_the_headers_and_the_body():
    with pytest.raises(Malformed, match="head is longer"):  # refused without its end
        parse(b"HTTP/1.1 200 OK\r\nX: " + b"a" * MAX_HEAD, eof=False)
    with pytest.raises(Malformed, match="headers"):
        parse(b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * (MAX_HEADERS + 1) + b"\r\n", eof=False)
    with pytest.raises(Malformed, match="more than 10"):
        parse(b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n", eof=False, max_body=10)
    with pytest.raises(Malformed, match="more than 10"):
        parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nabcdef\r\n6\r\n",
              eof=False, max_body=10)
    with pytest.raises(Malformed, match="more than 10"):
        parse(b"HTTP/1.1 200 OK\r\n\r\n", b"x" * 11, max_body=10)
    with pytest.raises(Malformed, match="trailers"):
        parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n"
              + b"X: y\r\n" * (MAX_HEAD // 6 + 1), eof=False)


# ------------------------------------------------------------------- generated, hostile

_TOKEN = st.text("abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=12)
_VALUE = st.text("".join(map(chr, range(0x21, 0x7f))) + " \t", max_size=30).map(str.strip)


@st.composite
def responses(draw: st.DrawFn) -> tuple[bytes, int, bytes]:
    """A well-formed response: (its bytes, its status, its body)."""
    status = draw(st.sampled_from([200, 201, 400, 404, 413, 500, 503]))
    body = draw(st.binary(max_size=300))
    headers = draw(st.lists(st.tuples(_TOKEN.filter(
        lambda n: n not in ("content-length", "transfer-encoding", "connection")), _VALUE),
        max_size=5))
    head = f"HTTP/1.1 {status} Whatever\r\n" + "".join(f"{n}: {v}\r\n" for n, v in headers)
    if draw(st.booleans()):
        raw = (head + f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    else:
        cuts = sorted(draw(st.lists(st.integers(0, len(body)), max_size=4)))
        pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
        raw = (head + "Transfer-Encoding: chunked\r\n\r\n").encode() + b"".join(
            b"%x\r\n%s\r\n" % (len(p), p) for p in pieces if p) + b"0\r\n\r\n"
    return raw, status, body


def splits(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(data)) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


@given(responses(), st.lists(st.integers(0, 2000), max_size=8))
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_generated_responses_read_the_same_however_split(made: tuple[bytes, int, bytes],
                                                         cuts: list[int]):
    raw, status, body = made
    response = parse(*splits(raw, cuts), eof=False)
    assert response is not None
    assert (response.status, response.body, response.keep_alive) == (status, body, True)


@given(responses(), st.data())
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_a_generated_response_cut_short_is_malformed(made: tuple[bytes, int, bytes],
                                                     data: st.DataObject):
    raw = made[0]
    cut = data.draw(st.integers(0, len(raw) - 1))
    assert outcome(raw[:cut]) == "malformed"


@given(responses(), st.lists(st.tuples(st.integers(0, 2000), st.integers(0, 255)),
                             min_size=1, max_size=6),
       st.lists(st.integers(0, 2000), max_size=6))
@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
def test_mutated_responses_are_read_or_refused_never_a_crash(
        made: tuple[bytes, int, bytes], flips: list[tuple[int, int]], cuts: list[int]):
    raw = bytearray(made[0])
    for where, byte in flips:
        raw[where % len(raw)] = byte
    assert outcome(*splits(bytes(raw), cuts)) is not None


@given(st.binary(max_size=500), st.lists(st.integers(0, 500), max_size=6))
@example(b"HTTP/1.1 200 OK\r\n\r\n", [])
@example(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n", [])
@settings(max_examples=500)
def test_any_bytes_are_read_or_refused_never_a_crash(data: bytes, cuts: list[int]):
    assert outcome(*splits(data, cuts)) is not None
    assert outcome(*splits(b"HTTP/1.1 200 OK\r\n" + data, cuts)) is not None


def test_a_header_of_blanks_is_read_in_linear_time_and_its_value_trimmed():
    """Red team (issue 19): a lazy value before `[ \\t]*` backtracked quadratically, so a
    header of 'a', 65,000 blanks, 'b' held the client for 30-45 s, past its timeout. The
    pattern now has no lazy part; the value is what is between the blanks at its ends."""
    from clankie.http1 import _HEADER

    assert b"*?" not in _HEADER.pattern and b"+?" not in _HEADER.pattern
    blanks = b" \t" * 15_000
    head = (b"HTTP/1.1 200 OK\r\nX-A: a" + blanks + b"b" + blanks + b"\r\n"
            b"Content-Length: 2\r\n\r\n{}")
    response = ResponseParser().feed(head)
    assert response is not None and response.body == b"{}"
    assert response.headers["x-a"] == "a" + blanks.decode() + "b"
