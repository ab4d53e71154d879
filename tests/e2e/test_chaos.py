"""The kill campaign of `tests/chaos.py` in `make test`: 30 SIGKILLs at random moments of a
real `clankie serve` under mixed load; `make chaos` runs 500 (docs/reliability.md)."""

from __future__ import annotations

from pathlib import Path

from tests.chaos import Campaign

KILLS = 30
EXPIRY_PATHS = {"expired:request_expired", "expired:moved on, read again",
                "expired:moved on, ended by a later ask"}


def test_r3_a4_a5_a7_a9_s5_thirty_kills_lose_no_acknowledged_answer_and_run_nothing_twice(
        tmp_path: Path):
    summary = Campaign(tmp_path, seed=20261130).run(KILLS)
    assert summary["errors"] == [], summary
    assert summary["acknowledged_answers_checked"] >= KILLS, summary  # it did real work
    counts = summary["counts"]
    assert counts.get("duplicate:same receipt", 0) >= 1, counts
    # S5/A7 under kills too: a held question expired, read as expired, and took no answer,
    # whichever lawful way its first answer was refused (A7, or A6 when turns queued before
    # it moved the revision, or A5 when one of them ended it on use; tests/chaos.py)
    assert sum(n for key, n in counts.items() if key in EXPIRY_PATHS) >= 1, counts
    assert summary["runs_checked"] >= KILLS
