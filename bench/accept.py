"""Benchmark: accepting answers and reading snapshots on a real `clankie serve` (Unix socket).

Prints JSON. Measures, with `synchronous=FULL`:
- `input_answer` accepts per second and latency p50/p99 with 1 and with 8 concurrent
  clients (each answer is to its own pending question, asked by Clankie's real scripted
  runs before timing starts; each accepted answer's continuation really runs, so the
  accepts compete with live runs, as they would in use);
- `input_get` latency p50/p99 for a conversation with 10 and with 100,000 prior events
  (SPEC S3: the two should be about equal).

Run: `make bench` (or `.venv/bin/python bench/accept.py [--accepts N] [--reads N]`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clankie.core.lifecycle import Change  # noqa: E402
from clankie.core.model import Author, Message, MessagePosted  # noqa: E402
from clankie.store import Store  # noqa: E402
from tests.e2e.served import Served, ask  # noqa: E402


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(samples: list[float], seconds: float | None = None) -> dict[str, float]:
    result = {"n": len(samples), "p50_ms": round(percentile(samples, 0.50) * 1000, 3),
              "p99_ms": round(percentile(samples, 0.99) * 1000, 3),
              "mean_ms": round(statistics.fmean(samples) * 1000, 3)}
    if seconds is not None:
        result["per_second"] = round(len(samples) / seconds, 1)
    return result


def prepare(served: Served, workspace: Path, count: int) -> list[tuple]:
    """`count` conversations, each with one pending question: (conversation, snapshot)."""
    prepared = []
    with served.client() as client:
        for _ in range(count):
            c = client.op("conversation_create", workspace=str(workspace)).conversation_id
            ask(client, c)
            prepared.append((c, client.input_get(c)))
    return prepared


def accepts(served: Served, workspace: Path, clients: int, per_client: int
            ) -> dict[str, float]:
    work = prepare(served, workspace, clients * per_client)
    latencies: list[list[float]] = [[] for _ in range(clients)]
    barrier = threading.Barrier(clients + 1)

    def answer(i: int) -> None:
        with served.client() as client:
            mine = work[i::clients]
            barrier.wait()
            for c, snap in mine:
                start = time.perf_counter()
                reply = client.input_answer(c, snap.pending.request_id,
                                            incarnation=snap.incarnation, revision=snap.revision,
                                            option_id=snap.pending.options[0].option_id)
                latencies[i].append(time.perf_counter() - start)
                assert not reply.duplicate

    threads = [threading.Thread(target=answer, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    return summary([x for per in latencies for x in per], elapsed)


def reads(served: Served, workspace: Path, events: int, count: int) -> dict[str, float]:
    with served.client() as client:
        c = client.op("conversation_create", workspace=str(workspace)).conversation_id
        ask(client, c)
        already = client.call("events_tail", {"conversation_id": c, "limit": 500})["next_after"]
        if events > already:
            _add_events(served, c, events - already)
        tail = client.call("events_tail", {"conversation_id": c, "after": events - 1})
        assert tail["next_after"] == events, tail
        samples = []
        for _ in range(count):
            start = time.perf_counter()
            snap = client.input_get(c)
            samples.append(time.perf_counter() - start)
            assert snap.pending is not None
    return summary(samples)


def _add_events(served: Served, conversation_id: str, count: int) -> None:
    """Append `count` message events in one transaction through the store's own save path."""
    store = Store(served.home.store)
    try:
        with store.write() as tx:
            conversation = tx.conversation(conversation_id)
            assert conversation is not None
            now = datetime.now(UTC)
            events = tuple(MessagePosted(Message(f"m{i}", conversation_id, Author.OWNER,
                                                 "filler", now)) for i in range(count))
            tx.save(Change(replace(conversation, revision=conversation.revision + 1),
                           events=events), receipt_limit=16, event_retention=200_000)
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accepts", type=int, default=200, help="answers per client")
    parser.add_argument("--reads", type=int, default=500, help="input_get calls per case")
    args = parser.parse_args()
    os.environ["CLANKIE_EVENT_RETENTION"] = "200000"
    with tempfile.TemporaryDirectory(prefix="clankie-bench-") as tmp:
        workspace = Path(tmp) / "project"
        workspace.mkdir()
        served = Served.start(Path(tmp) / "home")
        try:
            result = {
                "benchmark": "bench/accept.py",
                "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                            "platform": platform.platform()},
                "transport": "unix socket",
                "synchronous": "FULL",
                "input_answer_1_client": accepts(served, workspace, 1, args.accepts),
                "input_answer_8_clients": accepts(served, workspace, 8,
                                                  max(1, args.accepts // 4)),
                "input_get_10_events": reads(served, workspace, 10, args.reads),
                "input_get_100000_events": reads(served, workspace, 100_000, args.reads),
            }
        finally:
            served.stop()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
