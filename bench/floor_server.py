"""The floor of the answer path, for `bench/accept.py`: the same stack doing the least work.

A FastAPI app on uvicorn, on a Unix socket, in its own process, configured like
`clankie serve` (h11, no access log, a worker thread per request through
`anyio.to_thread` with a capacity limiter). `POST /v1/ops/input_answer` validates the same
strict DTO clankie uses, then, under one lock, makes one SQLite write in WAL mode with
`synchronous=FULL` (`BEGIN IMMEDIATE; INSERT; COMMIT`) and replies after the commit.

    python bench/floor_server.py SOCKET DATABASE
"""

from __future__ import annotations

import sqlite3
import sys
import threading
from functools import partial

import anyio
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from clankie import dto


def create_app(database: str) -> FastAPI:
    conn = sqlite3.connect(database, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE IF NOT EXISTS answers (request_id TEXT, option_id TEXT)")
    lock = threading.Lock()
    limiter = anyio.CapacityLimiter(16)
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)

    def accept(body: bytes) -> dict[str, object]:
        answer = dto.InputAnswer.model_validate_json(body)
        with lock:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO answers VALUES (?, ?)", (answer.request_id,
                                                               answer.option_id))
            conn.execute("COMMIT")
        return {"receipt": {"request_id": answer.request_id}, "duplicate": False}

    @app.post("/v1/ops/input_answer")
    async def input_answer(request: Request) -> JSONResponse:
        body = await request.body()
        return JSONResponse(await anyio.to_thread.run_sync(partial(accept, body),
                                                           limiter=limiter))

    return app


def main(socket: str, database: str) -> None:
    config = uvicorn.Config(create_app(database), uds=socket, lifespan="off",
                            access_log=False, log_level="warning")
    server = uvicorn.Server(config)
    print("floor serving", file=sys.stderr, flush=True)
    server.run()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
