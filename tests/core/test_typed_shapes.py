"""Issue 32: the shapes below the surfaces are typed, and what goes on the wire is as it
was. Each event's body has a TypedDict naming its fields in the order they are written
(SPEC V1-V4); the workspace refusal codes are one `WorkspaceCode` (SPEC section 11, W1-W10),
used by every raiser and comparer, and a refusal's JSON is the same text as before."""

from __future__ import annotations

import ast
from datetime import UTC, datetime
from pathlib import Path
from typing import get_type_hints

import pytest

import clankie
from clankie.core import model as m
from clankie.core.vocabulary import WorkspaceCode

AT = datetime(2026, 11, 30, 12, tzinfo=UTC)
RUN = m.Run("r", "c", m.RunKind.TURN, m.RunStatus.RUNNING, "i", AT)
EVENTS: list[tuple[object, type]] = [
    (m.InputRequested("c", "q", "Which?", ("a", "b"), AT), m.InputRequestedBody),
    (m.InputResolved("c", "q", m.QuestionStatus.ANSWERED, AT), m.InputResolvedBody),
    (m.MessagePosted(m.Message("m", "c", m.Author.OWNER, "hi", AT)), m.MessageBody),
    (m.RunStatusChanged(RUN, AT), m.RunStatusBody),
    (m.ConversationResetDone("c", AT), m.ConversationResetBody),
    (m.ToolActivity("c", "r", "read_file", "ok", None, "read a", AT), m.ToolActivityBody),
    (m.RunActivity("c", "r", "model_retry", "429", AT, AT), m.RunActivityBody),
]
SRC = Path(clankie.__file__).parent


@pytest.mark.parametrize(("event", "shape"), EVENTS)
def test_issue32_each_event_body_has_the_fields_of_its_typeddict_in_order(event, shape):
    body = event.body(7)  # type: ignore[attr-defined]
    assert list(body) == list(get_type_hints(shape))
    assert body["seq"] == 7 and body["type"] == event.type  # type: ignore[attr-defined]


def test_w1_w10_every_spec_workspace_code_is_a_workspace_code_with_its_wire_value():
    spec = {"invalid_argument", "invalid_path", "outside_workspace", "not_regular_file",
            "is_directory", "not_found", "denied_path", "binary_file", "time_limit",
            "unsafe_repository", "repository_too_large", "not_a_repository",
            "workspace_replaced", "budget_exhausted"}
    assert spec <= {c.value for c in WorkspaceCode}
    assert all(WorkspaceCode(c) == c and f"{WorkspaceCode(c)}" == c for c in spec)


def test_w1_a_refusal_reads_as_before():
    from clankie.workspace.tools import refused

    out = refused(WorkspaceCode.INVALID_PATH, "a '..' component is refused", "read_file: x")
    assert out.text == ('{"status": "refused", "code": "invalid_path", '
                        '"reason": "a \'..\' component is refused"}')
    assert (out.status, out.code) == ("refused", "invalid_path")


def test_issue32_no_refusal_is_raised_or_compared_with_a_bare_string():
    bare = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("Refusal", "refused") and node.args
                    and isinstance(node.args[0], ast.Constant)):
                bare.append(f"{path.name}:{node.lineno}")
            if (isinstance(node, ast.Compare) and isinstance(node.left, ast.Attribute)
                    and node.left.attr == "code" and isinstance(node.left.value, ast.Name)
                    and node.left.value.id == "refusal"
                    and any(isinstance(c, ast.Constant) for c in node.comparators)):
                bare.append(f"{path.name}:{node.lineno}")
    assert bare == []
