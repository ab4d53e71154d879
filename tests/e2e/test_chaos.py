"""The kill campaign of `tests/chaos.py` in `make test`: 30 SIGKILLs at random moments of a
real `clankie serve` under mixed load; `make chaos` runs 500 (docs/reliability.md)."""

from __future__ import annotations

from pathlib import Path

from tests.chaos import Campaign

KILLS = 30


def test_r3_a4_a5_a7_a9_s5_thirty_kills_lose_no_acknowledged_answer_and_run_nothing_twice(
        tmp_path: Path):
    summary = Campaign(tmp_path, seed=20261130).run(KILLS)
    assert summary["errors"] == [], summary
    assert summary["acknowledged_answers_checked"] >= KILLS, summary  # it did real work
    counts = summary["counts"]
    assert counts.get("duplicate:same receipt", 0) >= 1, counts
    assert counts.get("expired:request_expired", 0) >= 1, counts  # S5/A7 under kills too
    assert summary["runs_checked"] >= KILLS
