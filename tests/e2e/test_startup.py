"""Issue 39, "a CLI that starts fast": `clankie conversations list` against a real service,
with a question waiting (so its reply carries a workspace, who may ask and what waits),
builds the validators of exactly the two shapes it reads (its request, `ConversationList`,
and its result, `ConversationsOut`, whose items are checked within it) and loads none of
the core's dataclasses, the service, the store, the agent, the TUI or the MCP SDK.

The command runs in a fresh interpreter whose last act is to say what it loaded and built;
names are asserted, never a time (the times are bench/cli.py's, docs/performance.md).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.e2e.served import Served, ask, clankie

REPORT = """
import json, sys
from clankie.cli.entry import main
code = main(sys.argv[1:])
from pydantic import BaseModel
import clankie.dto as dto
built = sorted(n for n, v in vars(dto).items()
               if isinstance(v, type) and issubclass(v, BaseModel) and v.__pydantic_complete__)
print(json.dumps({"code": code, "modules": sorted(sys.modules), "built": built}),
      file=sys.stderr)
"""
NOT_FOR_LIST = ("clankie.core.model", "clankie.core.lifecycle", "clankie.service",
                "clankie.store", "clankie.agent", "clankie.tui", "textual", "mcp", "mcp_types")


def test_list_builds_only_its_own_shapes_and_loads_no_core_dataclass(served: Served,
                                                                      workspace: Path):
    with served.client() as client:
        c = client.call("conversation_create", {"workspace": str(workspace)})
        ask(client, c["conversation_id"])
    done = clankie("conversations", "list", home=served.home.path,
                   program=[sys.executable, "-c", REPORT])
    assert c["conversation_id"] in done.stdout and "?" in done.stdout, done.stdout
    said = json.loads(done.stderr.splitlines()[-1])
    assert said["code"] == 0
    assert said["built"] == ["ConversationList", "ConversationsOut"]
    loaded = [m for m in said["modules"]
              if any(m == p or m.startswith(p + ".") for p in NOT_FOR_LIST)]
    assert loaded == []
