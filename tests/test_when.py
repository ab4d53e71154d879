"""Times as the owner reads them (issue 19: local time to the minute, and relative)."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime

import pytest

from clankie import when

NOW = datetime(2026, 12, 1, 22, 47, 25, 495113, tzinfo=UTC)


@pytest.fixture
def berlin(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TZ", "Europe/Berlin")
    time.tzset()
    yield
    monkeypatch.delenv("TZ")
    time.tzset()


def test_local_time_is_the_owners_to_the_minute(berlin: None) -> None:
    assert os.environ["TZ"] == "Europe/Berlin"
    assert when.local("2026-12-01T22:47:25.495113Z") == "2026-12-01 23:47"


@pytest.mark.parametrize(("seconds", "words"), [
    (0.2, "1 s"), (59, "59 s"), (60, "1 min"), (3599, "59 min"), (3600, "1 h"),
    (86_280, "23 h 58 min"), (2 * 86_400 + 4 * 3600 + 59, "2 d 4 h"), (3 * 86_400, "3 d")])
def test_span_reads_at_a_glance(seconds: float, words: str) -> None:
    assert when.span(seconds) == words


def test_relative_says_future_past_and_now() -> None:
    assert when.relative("2026-12-02T22:45:26Z", NOW) == "in 23 h 58 min"
    assert when.relative("2026-12-01T22:42:25Z", NOW) == "5 min ago"
    assert when.relative("2026-12-01T22:47:25.9Z", NOW) == "now"


def test_shown_has_both(berlin: None) -> None:
    assert when.shown("2026-12-02T22:45:26Z", NOW) == "2026-12-02 23:45 (in 23 h 58 min)"


def test_brief_is_the_local_time_today_and_the_date_before_it(berlin: None) -> None:
    """Issue 19: each chat line carries its local time; a line from another day its date."""
    assert when.brief("2026-12-01T20:05:59Z", NOW) == "21:05"
    assert when.brief("2026-11-30T20:05:00Z", NOW) == "2026-11-30 21:05"
    # 23:30 UTC is already the next day in Berlin, as `now` (23:47 there) is not
    assert when.brief("2026-12-01T23:30:00Z", NOW) == "2026-12-02 00:30"
