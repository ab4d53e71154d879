"""Soak: a long run of mixed load on a real `clankie serve`, sampling what must stay bounded.

Load (client threads in this process): answers by option and in text, identical
duplicates, cancels, chat turns, resets, 50 concurrent `events_tail` long-polls, a device
taking and releasing Take Control, and a restart (SIGTERM, start again) every few
minutes. Once a second it samples the server: RSS, open descriptors, threads, the same of
its run process (issue 39: runs execute in a child of `clankie serve`), the store file,
the WAL file, and the largest event count and receipt count of any conversation.

It writes `soak.json` (the series and a summary with the checks) and `soak.png` (the
series, plotted with matplotlib) into `--out`, and prints the summary. The checks: after
warm-up RSS grows by under 10 %, descriptors and threads stay flat (per server process),
the WAL stays bounded, events and receipts stay within their settings. The SCRIPT asks
a choice question in every run, so a text answer appears only where a question allows it.

    make soak      (= .venv/bin/python bench/soak.py --minutes 30 --out soak-out)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import sqlite3
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from accept import ASK, Server, operator, serve

from clankie.client import ApiError, Client, ClientError

SCRIPT = {"turns": [[{"say": "Noted."}, {"ask": ASK}]] * 20_000}  # every run asks
CONVERSATIONS = 12
LONG_POLLS = 50
RECEIPT_LIMIT = 16
EVENT_RETENTION = 2_000


def process(pid: int) -> dict[str, Any]:
    """A process's RSS, descriptors and threads now."""
    status = dict(line.split(":", 1) for line in
                  Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return {"rss_mib": int(status["VmRSS"].split()[0]) / 1024,
            "fds": len(os.listdir(f"/proc/{pid}/fd")), "threads": int(status["Threads"])}


def run_process(pid: int) -> dict[str, Any]:
    """The server's run process (its child) as `run_*`; none while it has none."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError, ValueError):
            for child in (task / "children").read_text().split():
                with contextlib.suppress(OSError):
                    return {"run_pid": int(child),
                            **{f"run_{k}": v for k, v in process(int(child)).items()}}
    return {}


def sample(server: Server, home: Path) -> dict[str, Any]:
    pid = server.proc.pid
    db = home / "clankie.db"
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
        events = conn.execute("SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n "
                              "FROM events GROUP BY conversation_id)").fetchone()[0]
        receipts = conn.execute("SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM "
                                "questions WHERE status != 'pending' GROUP BY conversation_id)"
                                ).fetchone()[0]
    conn.close()
    wal = Path(f"{db}-wal")
    return {"t": time.time(), "pid": pid, **process(pid), **run_process(pid),
            "store_mib": db.stat().st_size / 2**20,
            "wal_mib": (wal.stat().st_size if wal.exists() else 0) / 2**20,
            "max_events": events, "max_receipts": receipts}


class Load:
    def __init__(self, home: Path, workspace: Path, seed: int) -> None:
        self.home = home
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.up = threading.Event()
        self.counts: dict[str, int] = {}
        with operator(home) as client:
            self.conversations = [client.call("conversation_create", {
                "workspace": str(workspace)})["conversation_id"] for _ in range(CONVERSATIONS)]
            self.device = client.call("device_pair", {"name": "soak", "mode": "control"})["token"]
            # V5: at most 8 waiting long-polls a credential, so the tails are spread over
            # read-only devices as many as they need (a ninth would return at once)
            self.readers = [client.call("device_pair", {"name": f"reader{n}",
                                                        "mode": "read_only"})["token"]
                            for n in range(-(-LONG_POLLS // 8))]
        self.up.set()

    def count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    def actions(self) -> None:
        answered: list[dict[str, Any]] = []
        while not self.stop.is_set():
            if not self.up.wait(1):
                continue
            try:
                with operator(self.home) as client:
                    while not self.stop.is_set() and self.up.is_set():
                        self._one(client, answered)
                        time.sleep(0.005)
            except ClientError:
                time.sleep(0.2)  # the service is restarting

    def _one(self, client: Client, answered: list[dict[str, Any]]) -> None:
        c = self.rng.choice(self.conversations)
        snap = client.call("input_get", {"conversation_id": c})
        q, roll = snap["pending"], self.rng.random()
        try:
            if q is None and roll > 0.2:
                return  # Clankie is still working on it: a person waits too
            if q is None or roll < 0.1:
                client.call("conversation_send", {"conversation_id": c, "text": "go on"})
                self.count("chat")
                return
            base = {"conversation_id": c, "request_id": q["request_id"],
                    "incarnation": snap["incarnation"], "revision": snap["revision"]}
            if roll < 0.55:
                payload = base | {"option_id": q["options"][0]["option_id"]}
                client.call("input_answer", payload)
                answered.append(payload)
                del answered[:-200]
                self.count("answer")
            elif roll < 0.7 and (q["allow_text"] or q["kind"] == "text"):
                client.call("input_answer", base | {"text": "in my own words"})
                self.count("text")
            elif roll < 0.8 and answered:
                client.call("input_answer", self.rng.choice(answered))
                self.count("duplicate")
            elif roll < 0.9:
                client.call("input_cancel", base)
                self.count("cancel")
            else:
                client.call("conversation_reset", {"conversation_id": c})
                self.count("reset")
        except ApiError as exc:
            self.count(f"refused:{exc.code}")

    def long_poll(self, index: int) -> None:
        c, after = self.conversations[index % CONVERSATIONS], 0
        while not self.stop.is_set():
            if not self.up.wait(1):
                continue
            try:
                url = f"unix://{self.home / 'clankie.sock'}"
                with Client(url, self.readers[index // 8]) as client:
                    while not self.stop.is_set():
                        page = client.call("events_tail", {"conversation_id": c, "after": after,
                                                           "limit": 500, "wait_ms": 5_000})
                        after = page["next_after"]
            except ClientError:
                time.sleep(0.2)

    def take_control(self) -> None:
        url = f"unix://{self.home / 'clankie.sock'}"
        while not self.stop.wait(2):
            if not self.up.is_set():
                continue
            try:
                with Client(url, self.device) as device:
                    device.call("device_take_control", {"ttl_s": 60})
                    self.stop.wait(1)
                    device.call("device_release", {})
                self.count("take_control")
            except ClientError:
                pass


def summarize(samples: list[dict[str, Any]], warmup_s: float) -> dict[str, Any]:
    start = samples[0]["t"]
    warm = [s for s in samples if s["t"] - start >= warmup_s] or samples
    by_pid: dict[int, list[dict[str, Any]]] = {}
    for s in warm:
        by_pid.setdefault(s["pid"], []).append(s)
    rss_first = min(s["rss_mib"] for s in warm[:30])
    rss_last = max(s["rss_mib"] for s in warm[-30:])
    runs = [s for s in warm if "run_rss_mib" in s] or [{"run_rss_mib": 0}]
    run_rss_first = min(s["run_rss_mib"] for s in runs[:30])
    run_rss_last = max(s["run_rss_mib"] for s in runs[-30:])
    # Per server process: how much the last minute's peak exceeds its first minute's.
    spread = {k: max(max(x.get(k, 0) for x in run[-60:]) - max(x.get(k, 0) for x in run[:60])
                     for run in by_pid.values())
              for k in ("fds", "threads", "run_fds", "run_threads")}
    checks = {
        "rss_growth_under_10_percent": rss_last <= rss_first * 1.10,
        "fds_flat": spread["fds"] <= 5,
        "threads_flat": spread["threads"] <= 5,
        "run_process_rss_growth_under_10_percent": run_rss_last <= run_rss_first * 1.10,
        "run_process_fds_flat": spread["run_fds"] <= 5,
        "run_process_threads_flat": spread["run_threads"] <= 5,
        "wal_bounded": max(s["wal_mib"] for s in warm) <= 64,
        "events_within_retention": max(s["max_events"] for s in samples) <= EVENT_RETENTION,
        "receipts_within_limit": max(s["max_receipts"] for s in samples) <= RECEIPT_LIMIT,
    }
    return {"samples": len(samples), "seconds": round(samples[-1]["t"] - start),
            "server_processes": len({s["pid"] for s in samples}),
            "rss_mib_after_warmup": round(rss_first, 1), "rss_mib_at_end": round(rss_last, 1),
            "fds_growth_per_process": spread["fds"],
            "threads_growth_per_process": spread["threads"],
            "run_process_rss_mib_after_warmup": round(run_rss_first, 1),
            "run_process_rss_mib_at_end": round(run_rss_last, 1),
            "run_process_fds_growth": spread["run_fds"],
            "run_process_threads_growth": spread["run_threads"],
            "wal_mib_max": round(max(s["wal_mib"] for s in samples), 2),
            "store_mib_end": round(samples[-1]["store_mib"], 2),
            "max_events_per_conversation": max(s["max_events"] for s in samples),
            "max_receipts_per_conversation": max(s["max_receipts"] for s in samples),
            "checks": checks, "all_passed": all(checks.values())}


def plot(samples: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    start = samples[0]["t"]
    minutes = [(s["t"] - start) / 60 for s in samples]
    series = [("rss_mib", "RSS (MiB)"), ("fds", "open descriptors"), ("threads", "threads"),
              ("run_rss_mib", "run process RSS (MiB)"),
              ("run_threads", "run process threads"),
              ("wal_mib", "WAL (MiB)"), ("max_events", "events (largest conversation)"),
              ("max_receipts", "receipts (largest conversation)")]
    figure, axes = plt.subplots(len(series), 1, figsize=(9, 17), sharex=True)
    for axis, (key, label) in zip(axes, series, strict=True):
        axis.plot(minutes, [s.get(key, float("nan")) for s in samples], linewidth=0.8)
        axis.set_ylabel(label, fontsize=8)
        axis.grid(alpha=0.3)
    axes[-1].set_xlabel("minutes")
    figure.suptitle("clankie soak: one sample a second (restarts every few minutes)")
    figure.tight_layout()
    figure.savefig(path, dpi=90)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--restart-every", type=float, default=5, help="minutes")
    parser.add_argument("--out", type=Path, default=Path("soak-out"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="clankie-soak-") as name:
        tmp = Path(name)
        (tmp / "script.json").write_text(json.dumps(SCRIPT))
        workspace = tmp / "project"
        workspace.mkdir()
        home = tmp / "home"
        server = serve(home, tmp / "script.json", EVENT_RETENTION)
        load = Load(home, workspace, seed=7)
        threads = [threading.Thread(target=load.actions, daemon=True) for _ in range(2)]
        threads += [threading.Thread(target=load.long_poll, args=(i,), daemon=True)
                    for i in range(LONG_POLLS)]
        threads.append(threading.Thread(target=load.take_control, daemon=True))
        for t in threads:
            t.start()
        samples: list[dict[str, Any]] = []
        start = last_restart = time.monotonic()
        try:
            while time.monotonic() - start < args.minutes * 60:
                time.sleep(1)
                samples.append(sample(server, home))
                if time.monotonic() - last_restart >= args.restart_every * 60:
                    load.up.clear()
                    server.stop(signal.SIGTERM)
                    server = serve(home, tmp / "script.json", EVENT_RETENTION)
                    load.up.set()
                    last_restart = time.monotonic()
        finally:
            load.stop.set()
            server.stop()
    summary = summarize(samples, warmup_s=min(120, args.minutes * 60 / 5))
    summary["load"] = dict(sorted(load.counts.items()))
    (args.out / "soak.json").write_text(json.dumps({"summary": summary, "samples": samples}))
    plot(samples, args.out / "soak.png")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
