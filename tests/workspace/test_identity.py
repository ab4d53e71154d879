"""SPEC section 2 (directory identity with birth time), A7/E (workspace replacement found on
use), M3 (`changed`) and W8, with a directory deleted and made again at the same path:
ext4 hands the new directory the old inode number at once, so only the birth time can
tell them apart. Identities saved before birth times existed keep comparing as before."""

from __future__ import annotations

import os
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from clankie.core.errors import ClankieError
from clankie.core.model import WorkspaceIdentity
from clankie.workspace.deny import DenyList
from clankie.workspace.identity import identify
from clankie.workspace.membership import membership
from clankie.workspace.tools import ToolSettings, call_tool
from tests.world import World


def test_section2_identities_differ_by_birth_only_where_both_have_one():
    a = WorkspaceIdentity("/p", 1, 2, 100)
    assert a.same_directory(WorkspaceIdentity("/p", 1, 2, 100))
    assert not a.same_directory(WorkspaceIdentity("/p", 1, 2, 101))  # recreated, same inode
    assert a.same_directory(WorkspaceIdentity("/p", 1, 2, None))  # saved by an older store
    assert WorkspaceIdentity("/p", 1, 2, None).same_directory(a)
    assert not a.same_directory(WorkspaceIdentity("/p", 1, 3, 100))
    assert not a.same_directory(WorkspaceIdentity("/q", 1, 2, 100))
    assert not a.same_directory(None)


def recreate_with_the_same_inode(path: Path) -> None:
    """Delete `path` and make it again until the file system gives back its inode (ext4
    does at once); skip where it never does, or keeps no birth time."""
    before = identify(str(path))
    assert before is not None
    if before.birth is None:
        pytest.skip("this file system reports no birth time")
    for _ in range(20):
        shutil.rmtree(path)
        path.mkdir()
        if path.stat().st_ino == before.ino:
            return
    pytest.skip("this file system never hands back an inode number at once")


def test_section2_a_recreated_directory_has_the_same_inode_and_another_identity(
        tmp_path: Path):
    path = tmp_path / "proj"
    path.mkdir()
    before = identify(str(path))
    recreate_with_the_same_inode(path)
    after = identify(str(path))
    assert after is not None and before is not None
    assert (after.path, after.dev, after.ino) == (before.path, before.dev, before.ino)
    assert not before.same_directory(after)


def test_a7_e_a_workspace_deleted_and_recreated_invalidates_the_pending_question(
        world: World):
    c = world.conversation()
    snap = world.ask(c)
    recreate_with_the_same_inode(world.workspace)
    with pytest.raises(ClankieError) as caught:
        world.answer(c, snap, option=0)
    assert caught.value.code == "request_closed"
    assert caught.value.extra["receipt"]["reason"] == "workspace_replaced"
    run = world.running_turn(c)
    assert world.service.runs.ask_question(run, {"kind": "text", "prompt": "x?"}).reason == \
        "workspace_replaced"  # Q3 as well


def test_m3_a_project_root_deleted_and_recreated_is_changed(world: World):
    root = world.root / "project-root"
    root.mkdir()  # empty: deleting it frees one inode, which mkdir then gets back
    saved_root = identify(str(root))
    assert saved_root is not None
    assert membership(saved_root, [("p1", saved_root)], 2.0).status == "member"
    recreate_with_the_same_inode(root)
    fact = membership(saved_root, [("p1", saved_root)], 2.0)
    assert (fact.status, fact.reason) == ("unknown", "changed")


def test_w8_a_recreated_workspace_is_refused_by_every_tool(tmp_path: Path):
    ws = tmp_path / "ws"
    ws.mkdir()
    saved = identify(str(ws))
    recreate_with_the_same_inode(ws)
    (ws / "README.md").write_text("an impostor\n")
    outcome = call_tool("read_file", '{"path": "README.md"}', saved, ToolSettings(DenyList()))
    assert outcome.code == "workspace_replaced" and "impostor" not in outcome.text


def test_an_identity_saved_by_an_older_store_keeps_comparing_as_before(world: World):
    c = world.conversation()
    with closing(sqlite3.connect(world.store.path)) as db, db:
        db.execute("UPDATE conversations SET workspace_birth = NULL")  # as migrated
    snap = world.ask(c)
    with closing(sqlite3.connect(world.store.path)) as db:
        assert db.execute("SELECT workspace_birth FROM questions").fetchone() == (None,)
    assert world.answer(c, snap, option=0)["duplicate"] is False  # still the same folder
    assert os.path.isdir(world.workspace)
