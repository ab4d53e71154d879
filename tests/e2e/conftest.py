"""End-to-end fixtures: a real served home, always stopped.

`served` is a service of the test's own (`own_served` is the same, for a module that makes
`served` its shared one); `shared_served` is one service for all the tests of a module that
take it (issue 32: in files whose tests each make a check or two, starting and stopping a
service per test was a fifth to a quarter of their time). A module gives it only to tests
that cannot disturb one another through it: each works in a conversation of its own and
asserts nothing about the service as a whole (every conversation, every credential), and
none stops it, rotates its token or changes its home; the others keep their own.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.served import Served


def _serving(home: Path) -> Iterator[Served]:
    server = Served.start(home)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    yield from _serving(tmp_path / "home")


@pytest.fixture
def own_served(tmp_path: Path) -> Iterator[Served]:
    yield from _serving(tmp_path / "home")


@pytest.fixture(scope="module")
def shared_served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    yield from _serving(tmp_path_factory.mktemp("shared") / "home")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path
