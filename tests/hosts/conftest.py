"""The host runs' summary at the end of the session: per host, how long its run took, the
names it gave clankie's tools, what its model was handed (SPEC P4), the MCP client name it
gave, where the entry's host settings came from, and what it tried to reach elsewhere.
`HOSTS_REPORT=FILE` also writes it as JSON (`make hosts` does, to hosts/last-run.json)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def pytest_terminal_summary(terminalreporter: Any) -> None:
    from tests.hosts.test_hosts import OUTCOMES

    if not OUTCOMES:
        return
    terminalreporter.write_sep("=", "coding hosts through clankie mcp")
    for o in OUTCOMES:
        terminalreporter.write_line(
            f"{o.host:9} {o.seconds:6.2f} s  exit {o.returncode}  model saw {o.model_saw or '?'}"
            f"  client {o.client_info!r}  entry from {o.registration}  "
            f"tools {', '.join(o.tool_names)}  stray {o.stray or 'none'}"
            f"  left running {o.leftovers}")
    report = os.environ.get("HOSTS_REPORT")
    if report:
        Path(report).write_text(json.dumps([o.__dict__ for o in OUTCOMES], indent=1) + "\n")
