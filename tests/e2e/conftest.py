"""End-to-end fixtures: a real served home, always stopped."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.served import Served


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    server = Served.start(tmp_path / "home")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path
