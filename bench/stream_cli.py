"""Bench of `clankie conversations send TEXT --wait` printing a reply as it streams (SPEC
D16, D21: "The first content of a reply reaches `send --wait`'s output within 60 ms").

A real `clankie serve` (the openai provider, its official SDK) against
`bench/stream_endpoint.py`, the fake endpoint on loopback that streams on a schedule and
logs the `time.monotonic()` at which it wrote each reply's first content (Linux's monotonic
clock is the same in every process). Each round runs `send --wait` as a process of its own,
its standard output a pty (a terminal: the live reply is printed), and notes when the
reply's first byte comes out of the pty. The same-run baseline: a live long-poll reader
(`bench/stream.py`'s, a process of its own, already waiting in the same conversation) and
the moment it gets the same first content; what `send --wait` adds is the CLI's own
reading and printing (its long-poll is the same kind of read). Prints one JSON document.

    .venv/bin/python bench/stream_cli.py [--rounds 30] [--quick] [--src OTHER/src]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import pty
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from accept import SOURCE, operator, percentile
from stream import Endpoint, Readers, new_conversation, serve_openai

FIRST = b"abcdefgh"  # the endpoint's text: its first content starts with it
FIRST_MS = 400  # the endpoint's wait before the first content: `send --wait` is polling


def send_wait(home: Path, c: str) -> tuple[float, int]:
    """`send --wait` on a pty: when the reply's first byte came out (monotonic), its exit."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLANKIE_")}
    env.update(CLANKIE_HOME=str(home), COLUMNS="200", TERM="xterm")
    if SOURCE:
        env["PYTHONPATH"] = SOURCE[0]
    main, child = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "clankie", "conversations", "send", c,
                             "go", "--wait"], env=env, stdin=subprocess.DEVNULL,
                            stdout=child, stderr=subprocess.DEVNULL)
    os.close(child)
    seen: list[float] = []
    out = bytearray()

    def read() -> None:
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:
                return
            if not chunk:
                return
            out.extend(chunk)
            if not seen and FIRST[:1] in chunk and FIRST in out:
                seen.append(time.monotonic())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    code = proc.wait(timeout=120)
    reader.join(10)
    os.close(main)
    assert seen, f"no reply on the terminal: {bytes(out)!r}"
    return seen[0], code


def rounds_of(home: Path, workspace: Path, endpoint: Endpoint, rounds: int
              ) -> dict[str, Any]:
    endpoint.plan(chunks=20, every_ms=10, size=8, first_ms=FIRST_MS)
    cli_ms: list[float] = []
    poll_ms: list[float] = []
    with operator(home) as client:
        c = new_conversation(client, workspace)
    readers = Readers(home, [c], 1)
    try:
        for _ in range(rounds):
            before = len(endpoint.log())
            printed, code = send_wait(home, c)
            assert code == 0, code
            polled = readers.get("first")
            log = endpoint.log()
            assert len(log) == before + 1, log[before:]
            cli_ms.append((printed - log[-1]["first"]) * 1000)
            poll_ms.append((polled - log[-1]["first"]) * 1000)
    finally:
        readers.stop()
    added = [a - b for a, b in zip(cli_ms, poll_ms, strict=True)]

    def figures(samples: list[float]) -> dict[str, float]:
        return {"p50": round(statistics.median(samples), 2),
                "p99": round(percentile(samples, 0.99), 2),
                "max": round(max(samples), 2)}

    return {"rounds": rounds,
            "send_wait_first_byte_ms": figures(cli_ms),
            "baseline_live_long_poll_ms": figures(poll_ms),
            "added_by_the_cli_ms": figures(added),
            "target": "send --wait's output within 60 ms of the endpoint's first content"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--quick", action="store_true", help="5 rounds, for a smoke run")
    parser.add_argument("--src", help="serve (and run the CLI of) another tree's src")
    args = parser.parse_args()
    if args.src:
        SOURCE.append(str(Path(args.src).resolve()))
    endpoint = Endpoint()
    result: dict[str, Any] = {"machine": f"{os.cpu_count()} cores, Python "
                                         f"{platform.python_version()}",
                              "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                              "load": [round(x, 2) for x in os.getloadavg()]}
    with tempfile.TemporaryDirectory(prefix="clankie-stream-cli-bench-") as tmp_name:
        tmp = Path(tmp_name)
        workspace = tmp / "workspace"
        workspace.mkdir()
        home = tmp / "home"
        server = serve_openai(home, endpoint)
        try:
            result["first_content"] = rounds_of(home, workspace, endpoint,
                                                5 if args.quick else args.rounds)
        finally:
            server.stop()
            endpoint.stop()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
