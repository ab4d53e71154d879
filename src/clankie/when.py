"""Times as the owner reads them: local wall-clock time, and how long from now.

Owns one decision, for the CLI and the TUI alike: a time the service sends (RFC 3339 UTC,
`2026-12-01T22:47:25.495113Z`) is shown in the owner's local time to the minute
(`2026-12-01 23:47`), with a relative phrase beside it ("in 23 h 58 min", "5 min ago").
Pure but for the local time zone; `--json` output keeps the service's own form.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime


def parse(stamp: str) -> datetime:
    """The aware UTC time of the service's `...Z` stamp."""
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def local(stamp: str) -> str:
    """`2026-12-01 23:47` in the owner's local time zone."""
    return parse(stamp).astimezone().strftime("%Y-%m-%d %H:%M")


def brief(stamp: str, now: datetime) -> str:
    """`23:47` when the stamp falls on the owner's local day of `now`, else `2026-11-30
    23:47`: the short time before each line of a chat log."""
    at = parse(stamp).astimezone()
    return at.strftime("%H:%M" if at.date() == now.astimezone().date() else "%Y-%m-%d %H:%M")


def span(seconds: float) -> str:
    """A length of time in words a person reads at a glance: `45 s`, `12 min`,
    `23 h 58 min`, `3 d 4 h`. Rounded up below a minute, down above (a countdown never
    says "0 s" while time is left)."""
    seconds = max(seconds, 0.0)
    if seconds < 60:
        return f"{math.ceil(seconds)} s"
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def relative(stamp: str, now: datetime) -> str:
    """`in 23 h 58 min`, `5 min ago`, or `now`."""
    delta = (parse(stamp) - now).total_seconds()
    if abs(delta) < 1:
        return "now"
    return f"in {span(delta)}" if delta > 0 else f"{span(-delta)} ago"


def shown(stamp: str, now: datetime) -> str:
    """`2026-12-01 23:47 (in 23 h 58 min)`."""
    return f"{local(stamp)} ({relative(stamp, now)})"


def shown_now(stamp: str) -> str:
    """`shown` against the clock now: for output printed once (the CLI's)."""
    return shown(stamp, datetime.now(UTC))
