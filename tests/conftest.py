"""Shared fixtures: a real store on disk, a movable clock, and a `World` to drive the service."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.world import World


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = World.create(tmp_path)
    try:
        yield w
    finally:
        w.close()
