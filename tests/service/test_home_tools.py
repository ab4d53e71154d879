"""SPEC W4, the service's own home, as a run meets it: the service knows its home (the
folder holding its store) by identity, from the store it is given, and every run's tools
deny it inside any workspace, with no setting to forget."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from clankie.service import Service
from clankie.service.executor import RunExecutor
from clankie.store import Store

from ..world import World
from .test_runs import Runs

TOKEN = "clk_HOME-TOKEN-5b8c03"


@pytest.fixture
def stop_after() -> Iterator[list[RunExecutor]]:
    executors: list[RunExecutor] = []
    yield executors
    for executor in executors:
        executor.stop(timeout=5)


def test_w4_home_the_service_knows_its_home_as_the_folder_of_its_store(tmp_path: Path):
    (tmp_path / "home").mkdir()
    store = Store(tmp_path / "home" / "clankie.db")
    try:
        st = os.stat(tmp_path / "home")
        assert Service(store).ctx.home == (st.st_dev, st.st_ino)
    finally:
        store.close()
    memory = Store(":memory:")
    try:
        assert Service(memory).ctx.home is None  # a store in memory has no folder
    finally:
        memory.close()


def test_w4_home_a_run_in_a_workspace_holding_the_home_reads_nothing_there(
        world: World, stop_after: list[RunExecutor]):
    home = Path(world.store.path).parent
    assert home.parent == world.root  # the world's workspace folder holds its home
    (home / "operator.token").write_text(f"{TOKEN}\n")
    r = Runs(world, {"turns": [[
        {"tool": "read_file", "args": {"path": f"{home.name}/operator.token"}},
        {"say": "{tool_result}"},
        {"tool": "search_text", "args": {"pattern": "clk_[A-Za-z0-9-]+"}},
        {"say": "{tool_result}"},
        {"tool": "list_files", "args": {"depth": 3}},
        {"say": "{tool_result}"}]]})
    stop_after.append(r.executor)
    c = str(world.call("conversation_create", {"kind": "owner",
                                               "workspace": str(world.root)})["conversation_id"])
    r.writes(lambda: world.call("conversation_send", {"conversation_id": c, "text": "look"}), c)
    events = world.events(c)
    assert TOKEN not in json.dumps(events)
    read, found, listed = (json.loads(e["text"]) for e in events
                           if e["type"] == "message" and e["author"] == "clankie")
    assert read["code"] == "denied_path"
    assert found["matches"] == [] and found["skipped_denied"] == 1
    assert {"path": home.name, "type": "directory", "size": None,
            "denied": True} in listed["entries"]
    assert not [e for e in listed["entries"] if e["path"].startswith(f"{home.name}/")]
