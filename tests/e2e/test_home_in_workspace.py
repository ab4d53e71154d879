"""SPEC W4 end to end (issue 28): a conversation bound to a folder that holds the service's
own home (as `~` holds the default home) and a model that goes for `operator.token`,
directly, through a symlink and by searching for a token's shape. No byte of the token
reaches the model, the events, or the store's files (the SQLite file, its `-wal` and
`-shm`, read as bytes), while the service runs or after it stopped."""

from __future__ import annotations

import json
from pathlib import Path

from clankie import dto
from tests.e2e.served import Served, finished

SHAPE = "clk_[A-Za-z0-9_-]+"  # what an operator token looks like


def store_bytes(served: Served) -> bytes:
    files = [served.home.store.with_name(served.home.store.name + tail)
             for tail in ("", "-wal", "-shm")]
    return b"".join(f.read_bytes() for f in files if f.exists())


def test_w4_home_a_model_never_reads_the_operator_token_of_a_home_in_its_workspace(
        tmp_path: Path):
    workspace = tmp_path / "me"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("nothing to see\n")
    (workspace / "tok").symlink_to("home/operator.token")
    steps = [{"tool": "read_file", "args": {"path": "home/operator.token"}},
             {"tool": "read_file", "args": {"path": "tok"}},
             {"tool": "search_text", "args": {"pattern": SHAPE}},
             {"tool": "search_text", "args": {"pattern": SHAPE, "include_ignored": True}},
             {"tool": "list_files", "args": {"depth": 3}}]
    script = {"turns": [[item for step in steps for item in (step, {"say": "{tool_result}"})]]}
    served = Served.start(workspace / "home", script=script)
    try:
        token = served.home.token_file.read_text().strip()
        assert token.startswith("clk_")
        client = served.client()
        try:
            c = str(client.op(dto.CONVERSATION_CREATE,
                              dto.ConversationCreate(workspace=str(workspace))).conversation_id)
            sent = client.call("conversation_send", {"conversation_id": c, "text": "look"})
            assert finished(client, sent["run_id"])["status"] == "succeeded"
            events = client.call("events_tail", {"conversation_id": c, "limit": 500})["events"]
        finally:
            client.close()
        assert token not in json.dumps(events)
        said = [json.loads(e["text"]) for e in events
                if e["type"] == "message" and e["author"] == "clankie"]
        direct, linked, found, everything, listed = said
        assert direct["code"] == linked["code"] == "denied_path"
        for search in (found, everything):
            assert search["matches"] == [] and search["skipped_denied"] == 1
        assert {"path": "home", "type": "directory", "size": None,
                "denied": True} in listed["entries"]
        assert not [e for e in listed["entries"] if e["path"].startswith("home/")]
        activity = [(e["tool"], e["status"], e["code"]) for e in events
                    if e["type"] == "tool_activity"]
        assert activity[:2] == [("read_file", "refused", "denied_path")] * 2
        assert token.encode() not in store_bytes(served)
    finally:
        assert served.stop() == 0
    assert token.encode() not in store_bytes(served)
