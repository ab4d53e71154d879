"""Bench of the TUI's live reply (SPEC D15, D21). Prints one JSON document.

- `update`: the chat app (headless, Textual's `run_test`) shown a reply being written, one
  live answer (`reply_delta`, validated as the tail validates it) at a time, each 100
  characters of words with a paragraph every ~600, after 100 lines of a conversation so far
  (so the log scrolls with each update, whatever the reply's size): for the last 100 updates of a
  100,000-character reply against the last 10 of a 1,000-character one, and their ratio
  (D21: within 1.5x), `handled` (wall time: the answer validated and shown in the log) and
  `drawn_cpu` (CPU time: that, and the screen drawn again, `Pilot.pause`). Baseline in the
  same run: the CPU of a pause with nothing new.
- `first_content`: a real `clankie serve` (the openai provider, its SDK) against
  `bench/stream_endpoint.py`: the endpoint writes a reply's first content -> the TUI
  (in this process, following the conversation as `clankie chat` does) has drawn it on its
  screen (D21: within 100 ms). Baseline: an owner's message sent -> its line drawn.

    .venv/bin/python bench/stream_tui.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from accept import percentile
from stream import Endpoint, new_conversation, serve_openai, url_token

from clankie import dto
from clankie.client import AsyncClient, Client
from clankie.tui.app import ChatApp, ChatLog

C = "3c1e9a7b-8d2f-4e6a-9b0c-1d2e3f4a5b6c"
AT = "2026-12-06T12:00:00.000000Z"
STEP = 100  # characters per update: 0.1 s of a model writing 1,000 a second
HISTORY = 100  # lines in the log before the reply


class Quiet:
    """A service with nothing to tell: every long poll waits forever."""

    async def call(self, op: str, payload: Any = None) -> dict[str, Any]:
        if op == "events_tail":
            await asyncio.Event().wait()
        if op == "input_get":
            return {"conversation_id": C, "incarnation": C, "revision": 1, "pending": None,
                    "request": None}
        if op == "conversation_get":
            return {"conversation_id": C, "workspace": {"path": "/tmp"}}
        return {"model": {"provider": "scripted", "model": None, "endpoint_host": None},
                "settings": {"model_stall_timeout": 60}}

    async def aclose(self) -> None:
        pass


def text_of(size: int) -> str:
    words, n = [], 0
    while n < size:
        word = f"word{len(words)}" + ("\n\n" if len(words) % 90 == 89 else " ")
        words.append(word)
        n += len(word)
    return "".join(words)[:size]


def answer(text: str, offset: int, length: int) -> dict[str, Any]:
    return {"type": "reply_delta", "conversation_id": C, "run_id": C, "reply_id": C,
            "attempt": 1, "state": "writing", "offset": offset,
            "text": text[offset:length], "length": length, "calling": [], "idle_ms": 0,
            "started_at": AT, "at": AT}


async def updates(size: int, measured: int) -> dict[str, list[float]]:
    """For each of the last `measured` updates of a `size`-character reply, in ms: the
    app's own work (the answer validated and shown in the log: `handled`), and the CPU of
    that and of drawing the screen again (`drawn_cpu`); and the CPU of as many pauses with
    nothing new (`empty_cpu`, the baseline)."""
    app = ChatApp(Quiet(), C, "bench")
    text = text_of(size)
    got: dict[str, list[float]] = {"handled": [], "drawn_cpu": [], "empty_cpu": []}
    async with app.run_test(headless=True, size=(100, 40)) as pilot:
        for n in range(HISTORY):  # a conversation so far: the log scrolls with each update
            app.say(f"you: an earlier message, number {n}")
        await pilot.pause()
        for offset in range(0, size, STEP):
            page = answer(text, offset, min(offset + STEP, size))
            cpu, start = time.process_time(), time.perf_counter()
            app._show_live(dto.LiveReply.model_validate(page))
            handled = time.perf_counter() - start
            await pilot.pause()
            drawn_cpu = time.process_time() - cpu
            if offset >= size - measured * STEP:
                got["handled"].append(handled * 1000)
                got["drawn_cpu"].append(drawn_cpu * 1000)
                cpu = time.process_time()
                await pilot.pause()
                got["empty_cpu"].append((time.process_time() - cpu) * 1000)
        assert app.query_one(ChatLog).writing is not None
    return got


def figures(samples: list[float]) -> dict[str, float]:
    return {"p50": round(statistics.median(samples), 3),
            "p99": round(percentile(samples, 0.99), 3)}


async def update_figures(rounds: int) -> dict[str, Any]:
    small: dict[str, list[float]] = {"handled": [], "drawn_cpu": [], "empty_cpu": []}
    large: dict[str, list[float]] = {"handled": [], "drawn_cpu": [], "empty_cpu": []}
    for _ in range(rounds):
        for size, measured, into in ((1_000, 10, small), (100_000, 100, large)):
            for key, samples in (await updates(size, measured)).items():
                into[key] += samples
    result: dict[str, Any] = {}
    for key in ("handled", "drawn_cpu"):
        result[key] = {"reply_1000_ms": figures(small[key]),
                       "reply_100000_ms": figures(large[key]),
                       "ratio_p50": round(statistics.median(large[key]) /
                                          statistics.median(small[key]), 3)}
    result["baseline_empty_pause_cpu_ms"] = figures(small["empty_cpu"] + large["empty_cpu"])
    result["target"] = "ratio_p50 <= 1.5 (D21)"
    return result


async def drawn(app: ChatApp, seen: Callable[[], bool]) -> float:
    """When the screen was drawn after `seen` first held (`time.monotonic()`)."""
    await until(seen, 0.001)
    done: asyncio.Future[float] = asyncio.get_running_loop().create_future()
    app.call_after_refresh(lambda: done.done() or done.set_result(time.monotonic()))
    return await done


async def first_content(home: Path, c: str, endpoint: Endpoint, rounds: int
                        ) -> dict[str, Any]:
    url, token = url_token(home)
    endpoint.plan(chunks=5, every_ms=10, size=8, first_ms=150)
    app = ChatApp(AsyncClient(url, token), c, "bench")
    live_ms: list[float] = []
    wake_ms: list[float] = []
    async with app.run_test(headless=True, size=(100, 40)):
        log = app.query_one(ChatLog)
        for n in range(rounds):
            before = len(endpoint.log())
            said = f"go {n}"
            sent = time.monotonic()
            reply = await app.api.call("conversation_send", {"conversation_id": c,
                                                             "text": said})
            wake_ms.append((await drawn(app, lambda s=said: any(
                f"you: {s}" in line.text for line in log.lines[-3:])) - sent) * 1000)
            mark = len(log.lines)
            shown = await drawn(app, lambda m=mark: any(
                "clankie: abcdefgh" in line.text for line in log.lines[m - 1:]))
            while (await app.api.call("run_get", {"run_id": reply["run_id"]}))["status"] in (
                    "queued", "running"):
                await asyncio.sleep(0.01)
            log_entries = endpoint.log()
            assert len(log_entries) == before + 1, log_entries[before:]
            live_ms.append((shown - log_entries[-1]["first"]) * 1000)
            await until(lambda: log.writing is None)
    return {"endpoint_to_tui_screen_ms": figures(live_ms),
            "baseline_owner_message_to_tui_screen_ms": figures(wake_ms),
            "target": "p50 <= 100 ms (D21)"}


async def until(probe: Callable[[], bool], every: float = 0.005) -> None:
    deadline = time.monotonic() + 60
    while not probe():
        assert time.monotonic() < deadline, "it did not happen within 60 s"
        await asyncio.sleep(every)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    args = parser.parse_args()
    result: dict[str, Any] = {"machine": f"{os.cpu_count()} cores, Python "
                                         f"{platform.python_version()}",
                              "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                              "load": os.getloadavg()[0]}
    run: Callable[[Awaitable[Any]], Any] = asyncio.run
    result["update"] = run(update_figures(1 if args.quick else 3))
    endpoint = Endpoint()
    with tempfile.TemporaryDirectory(prefix="clankie-stream-tui-") as tmp_name:
        home = Path(tmp_name) / "home"
        workspace = Path(tmp_name) / "workspace"
        workspace.mkdir()
        server = serve_openai(home, endpoint)
        try:
            url, token = url_token(home)
            with Client(url, token, timeout=60) as client:
                c = new_conversation(client, workspace)
            result["first_content"] = run(first_content(home, c, endpoint,
                                                        3 if args.quick else 20))
        finally:
            server.stop()
            endpoint.stop()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
