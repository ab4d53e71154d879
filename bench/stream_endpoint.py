"""A fake OpenAI-compatible endpoint on loopback that streams on a schedule, for
`bench/stream.py` (a process of its own).

`python bench/stream_endpoint.py`: prints `{"url": ...}` once listening. Each
`POST /v1/chat/completions` with `"stream": true` is answered with chat-completions chunks
(`data: {...}` lines, then `data: [DONE]`), on the schedule last set by `POST /plan`
`{"chunks": N, "every_ms": M, "size": S, "first_ms": F}` (N content chunks of S characters,
the first after F ms, then one every M ms; M may be 0). `GET /log` returns, for each
request in order, the `time.monotonic()` at which its first content chunk was written
(Linux's monotonic clock is the same in every process), and its count of chunks.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

LOG: list[dict[str, Any]] = []
LOCK = threading.Lock()
PLAN: dict[str, float] = {"chunks": 20, "every_ms": 10, "size": 8, "first_ms": 20}


def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    body = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0,
            "model": "bench", "choices": [{"index": 0, "delta": delta,
                                           "finish_reason": finish}]}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        with LOCK:
            body = json.dumps(LOG).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["content-length"])))
        if self.path == "/plan":
            with LOCK:
                PLAN.update(request)
            self.send_response(204)
            self.send_header("content-length", "0")
            self.end_headers()
            return
        with LOCK:
            plan = dict(PLAN)
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        entry: dict[str, Any] = {"first": None, "chunks": int(plan["chunks"])}
        with LOCK:
            LOG.append(entry)

        def send(data: bytes) -> None:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        send(chunk({"role": "assistant", "content": ""}))
        time.sleep(plan["first_ms"] / 1000)
        text = "abcdefgh" * (int(plan["size"]) // 8 + 1)
        start = time.monotonic()
        for n in range(int(plan["chunks"])):
            if plan["every_ms"]:
                wait = start + n * plan["every_ms"] / 1000 - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
            send(chunk({"content": text[:int(plan["size"])]}))
            if n == 0:
                entry["first"] = time.monotonic()
        send(chunk({}, "stop"))
        send(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(json.dumps({"url": f"http://127.0.0.1:{server.server_address[1]}/v1"}), flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
