"""Shared fixtures (a real store on disk, a movable clock, and a `World` to drive the service)
and the test markers, applied here by place and by measured duration rather than in each file.

Markers (registered in pyproject.toml, checked with `--strict-markers`):
- `e2e`: everything under tests/e2e (a real `clankie serve` in a subprocess);
- `tui`: everything under tests/tui (Textual's Pilot, snapshots, tmux);
- `slow`: the modules and tests named in `SLOW` below, the slowest measured with
  `pytest --durations=60` (each over about 2 s on the 2-core development machine).
`make check` leaves out all three (`-m "not e2e and not tui and not slow"`); `make test` runs
everything.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.world import World

TESTS = Path(__file__).resolve().parent

# Node ID prefixes (relative to the repository): a module, or a single test in it.
SLOW: tuple[str, ...] = (
)

BY_FOLDER = {"e2e": pytest.mark.e2e, "tui": pytest.mark.tui}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(item.path).resolve()
        if path.is_relative_to(TESTS):
            folder = path.relative_to(TESTS).parts[0]
            if folder in BY_FOLDER:
                item.add_marker(BY_FOLDER[folder])
        if item.nodeid.startswith(SLOW):
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = World.create(tmp_path)
    try:
        yield w
    finally:
        w.close()
