"""Issue 39, "a CLI that starts fast": importing the shapes builds none of their validators
(each is built when first used, so a command builds only the shapes it reads), and the
shapes, the client and the CLI load none of the core's dataclasses (`core.model`): the kinds
and statuses they carry are `core.vocabulary`'s. Each case runs in a fresh interpreter and
asserts names (the modules loaded, the shapes built), never a time: the times are
bench/cli.py's and bench/mcp.py's (docs/performance.md). `tests/e2e/test_startup.py` checks
the same of `clankie conversations list` against a real service.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.test_entry import imported, loaded

ROOT = Path(__file__).resolve().parents[1]

BUILT = """
import json
from pydantic import BaseModel
import clankie.dto as dto
print(json.dumps({
    "models": sorted(n for n, v in vars(dto).items() if isinstance(v, type)
                     and issubclass(v, BaseModel) and v.__pydantic_complete__),
    "adapters": sorted(n for n, v in vars(dto).items()
                       if type(v).__name__ == "TypeAdapter" and v.pydantic_complete),
}))
"""


def test_importing_the_shapes_builds_no_validator():
    """`import clankie.dto` defines every shape and the op table, and builds no validator: not
    a model's, not `ASK_QUESTION_ARGS`'s (before issue 39 it built all of them, a hundred
    milliseconds of every command that reads a typed result)."""
    done = subprocess.run([sys.executable, "-c", BUILT], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT / "src")))
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == {"models": [], "adapters": []}


def test_the_cli_the_client_and_the_shapes_load_no_dataclass_of_the_core():
    """What every command that reads a typed result imports loads no `core.model` (its
    dataclasses cost a tenth of `conversations list`'s start, issue 39), nor the service,
    the store or the agent."""
    _, names = imported("-c", "import clankie.cli.main, clankie.client, clankie.dto")
    assert loaded(names, "clankie.dto") and loaded(names, "clankie.core.vocabulary")
    assert [p for p in ("clankie.core.model", "clankie.core.lifecycle", "clankie.service",
                        "clankie.store", "clankie.agent") if loaded(names, p)] == []
