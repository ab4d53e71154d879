"""The answer path of two trees, interleaved: is one slower than the other?

Runs `bench/accept.py`'s 1-client, no-continuation and 8-client answer drives (with their
floor) for this tree and for `--src OTHER/src`, in turn, `--rounds` times each, each round
a process of its own with a server of its own; prints one JSON document with every round
and, per tree, the median of each figure and this tree's over the other's. Interleaving is
what makes the two comparable on a shared machine: a quick single run of each, one after
the other, once showed a regression that four interleaved rounds did not
(docs/performance.md, "The answer path after issues 40-42").

    .venv/bin/python bench/accept_vs.py --src /tmp/before/src [--rounds 2] [--accepts 150]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import accept  # bench/accept.py, found through the path above


def one_round(src: str | None, accepts: int) -> dict[str, Any]:
    """This process's own round: the floor, then the three drives on one server."""
    if src is not None:
        accept.SOURCE.append(src)
    with tempfile.TemporaryDirectory(prefix="clankie-vs-") as name:
        tmp = Path(name)
        workspace = tmp / "project"
        workspace.mkdir()
        (tmp / "script.json").write_text(json.dumps(accept.SCRIPT))
        floor = accept.floor(tmp, accepts)["1_client"]
        home = tmp / "home"
        server = accept.serve(home, tmp / "script.json")
        try:
            one = accept.accepts_on(server, home, workspace, accepts, 1)
            bare = accept.accepts_without_runs(server, home, tmp, accepts)
            eight = accept.accepts_on(server, home, workspace, accepts * 2, 8)
        finally:
            server.stop()
    return {"floor_p50_ms": floor["p50_ms"],
            "one_p50_over_floor": round(one["p50_ms"] / floor["p50_ms"], 2),
            "one_cpu_ms_both_processes": one["cpu_ms_per_answer_both_processes"],
            "one_run_process_cpu_ms": one["run_process_per_answer"]["cpu_ms"],
            "no_continuation_p50_over_floor": round(bare["p50_ms"] / floor["p50_ms"], 2),
            "no_continuation_server_cpu_ms": bare["server_per_answer"]["cpu_ms"],
            "eight_clients_per_second": eight["per_second"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, required=True, help="the other tree's src")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--accepts", type=int, default=150, help="answers a drive")
    parser.add_argument("--round", choices=["this", "other"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.round is not None:  # one round, in a process of its own
        src = str(args.src.resolve()) if args.round == "other" else None
        print(json.dumps(one_round(src, args.accepts)))
        return
    rounds: dict[str, list[dict[str, Any]]] = {"this": [], "other": []}
    for _ in range(args.rounds):
        for tree in ("this", "other"):
            done = subprocess.run(
                [sys.executable, __file__, "--src", str(args.src), "--accepts",
                 str(args.accepts), "--round", tree],
                capture_output=True, text=True, check=True)
            rounds[tree].append(json.loads(done.stdout.strip().splitlines()[-1]))
    medians = {tree: {key: statistics.median(r[key] for r in rs) for key in rs[0]}
               for tree, rs in rounds.items()}
    print(json.dumps({
        "benchmark": "bench/accept_vs.py", "other": str(args.src), "rounds": rounds,
        "medians": medians,
        "this_over_other": {key: round(medians["this"][key] / medians["other"][key], 2)
                            for key in medians["this"] if medians["other"][key]}},
        indent=2))


if __name__ == "__main__":
    main()
