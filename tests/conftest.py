"""Shared fixtures (a real store on disk, a movable clock, and a `World` to drive the service)
and the test markers, applied here by place and by measured duration rather than in each file.

Markers (registered in pyproject.toml, checked with `--strict-markers`):
- `e2e`: everything under tests/e2e (a real `clankie serve` in a subprocess);
- `tui`: everything under tests/tui (Textual's Pilot, snapshots, tmux);
- `hosts`: everything under tests/hosts (real coding agents from hosts/node_modules, which
  `make hosts` installs; skipped where they are not installed);
- `slow`: the modules and tests named in `SLOW` below, the slowest measured with
  `pytest --durations=60` (each over about 2 s on the 2-core development machine).
`make check` leaves out all three (`-m "not e2e and not tui and not slow"`); `make test` runs
everything.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from clankie.settings import Settings
from tests.world import World

TESTS = Path(__file__).resolve().parent

# Node ID prefixes (relative to the repository): a module, or a single test in it.
SLOW: tuple[str, ...] = (
    "tests/store/test_crash_safety.py",  # SIGKILLs a child process again and again: minutes
    "tests/service/test_state_machine.py",  # the stateful Hypothesis machine: 20 s to minutes
    "tests/agent/test_wire_campaign.py",  # a Hypothesis campaign against a hostile endpoint
    "tests/workspace/test_hostile_campaign.py",  # generated hostile repositories, real git
    "tests/workspace/test_bounds.py",  # 60,000 entries, 50 MiB files, 300 folders deep
    "tests/agent/test_hostile_endpoint.py",  # waits out model timeouts against a trickle
    "tests/api/test_client.py",  # a real `clankie serve` per test
    "tests/api/test_fair_waiting.py",  # hundreds of long-polls and a whole-request deadline
    "tests/test_demo.py",  # `clankie demo`, the whole question path in subprocesses
    "tests/test_entry.py::test_help_imports_neither_the_service_the_store_the_tui_nor_httpx",
    "tests/test_entry.py::test_anything_else_goes_to_the_full_cli",
    "tests/test_text.py::test_text_from_others_every_code_point_alone_is_itself_or_names_itself",
    "tests/workspace/test_hostile_git.py::test_w5_w6_any_ignore_or_attribute_file_is_read_never",
    "tests/workspace/test_hostile_git.py::test_w7_an_index_cut_short_anywhere_is_unsafe_never",
    "tests/agent/test_wire.py::test_r8_a_stored_step_of_thousands_of_calls_fails_no_later_run",
    "tests/service/test_concurrency.py",  # sixteen services answering at once, twelve times
    # Issue 32 (make check under 60 s): the fast tests measured over 2 s with --durations=40.
    "tests/test_packaging.py",  # builds the wheel: 8 s
    # Issue 42: `clankie service` subprocesses, several each (2 s)
    "tests/test_cli_service.py::test_issue42_a_unit_that_differs_is_never_written_over_without_replace",
    "tests/test_cli_service.py::test_issue42_web_and_tcp_go_to_serve_with_a_port_of_their_own",
    "tests/workspace/test_git_agreement.py",  # generated repositories against real git: 20 s
    "tests/workspace/test_git_memory.py::test_w5_a_tree_of_a_million_entries_stays_within_the_bounds",
    "tests/workspace/test_git_memory.py::test_w5_an_index_of_115000_entries_and_a_tree_of_134000_other_paths",
    "tests/workspace/test_red_team_28.py::test_w5_git_status_with_a_home_ends_within_the_bound_on_deep_folders",
    "tests/workspace/test_red_team_28.py::test_w5_many_large_ignore_files_are_never_all_held",
    "tests/workspace/test_git_races.py::test_w7_a_repository_changed_during_calls_never_leaks_a_byte_or_a_foreign_commit",
)

BY_FOLDER = {"e2e": pytest.mark.e2e, "tui": pytest.mark.tui, "hosts": pytest.mark.hosts}


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Say loudly when the browser tests did not run (tests/e2e/browser.py)."""
    skipped = [r for r in terminalreporter.stats.get("skipped", [])
               if "BROWSER TESTS SKIPPED" in str(getattr(r, "longrepr", ""))]
    if skipped:
        terminalreporter.write_sep("!", f"{len(skipped)} BROWSER TESTS SKIPPED: no Chromium "
                                   "or no Playwright; CI sets REQUIRE_BROWSER_TESTS=1",
                                   red=True, bold=True)


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
def peer(tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """Scripted HTTP peers on Unix sockets (`peer(reply(b"{}"), SILENT)`: one reply per
    request, in order; tests/api/test_client_wire.py), all closed at the end of the test."""
    from tests.api.test_client_wire import ScriptedPeer

    made: list[ScriptedPeer] = []

    def make(*replies: bytes) -> ScriptedPeer:
        made.append(ScriptedPeer(tmp_path / f"p{len(made)}.sock", *replies))
        return made[-1]

    yield make
    for p in made:
        p.close()


@pytest.fixture
def make_world(tmp_path: Path) -> Iterator[Callable[..., World]]:
    """Worlds with their own settings (`make_world(Settings(receipt_limit=2))`), each in its
    own folder (the first in `tmp_path` itself), all closed at the end of the test."""
    made: list[World] = []

    def make(settings: Settings | None = None) -> World:
        root = tmp_path / f"world-{len(made)}" if made else tmp_path
        root.mkdir(exist_ok=True)
        made.append(World.create(root, settings))
        return made[-1]

    try:
        yield make
    finally:
        for w in made:
            w.close()


@pytest.fixture
def world(make_world: Callable[..., World]) -> World:
    return make_world()
