"""The notification hook (`notify_command`) in a real `clankie serve`: one JSON document per
question with every field, optionally one per ending; a hook that hangs, fails or is
missing never delays or changes an ask, an answer or a snapshot; a storm of questions
runs at most the bounded number of hooks at once."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from clankie import dto
from clankie.service.notify import MAX_RUNNING
from tests.e2e.served import Served, ask, settle
from tests.polling import eventually

HOOK = """
import json, os, sys, time
out, mode = sys.argv[1], sys.argv[2]
data = sys.stdin.read()
def note(text):
    fd = os.open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.write(fd, text.encode())
    os.close(fd)
if mode == "record":
    note(data)
elif mode == "slow":
    note("+\\n"); time.sleep(0.3); note(data); note("-\\n")
elif mode == "hang":
    time.sleep(60)
elif mode == "fail":
    sys.stderr.write("the hook broke\\n"); sys.exit(1)
elif mode == "env":
    note(json.dumps(dict(os.environ)) + "\\n")
elif mode == "flood":
    chunk = "\\x1b[2J" + "x" * 65536
    for _ in range(3000):  # 200 MB on stderr, then a failure
        sys.stderr.write(chunk)
    note("flooded\\n"); sys.exit(3)
"""


def hooked(tmp_path: Path, mode: str, **env: str) -> tuple[Served, Path]:
    script, out = tmp_path / "hook.py", tmp_path / f"hook-{mode}.out"
    script.write_text(HOOK)
    command = json.dumps([sys.executable, str(script), str(out), mode])
    return Served.start(tmp_path / f"home-{mode}", env={"CLANKIE_NOTIFY_COMMAND": command,
                                                        **env}), out


def documents(out: Path) -> list[dict[str, Any]]:
    """The hook's documents written whole so far: a read may catch a hook in the middle of
    its write, so the last piece, until its newline has come, is not one yet."""
    if not out.exists():
        return []
    written = out.read_text().split("\n")[:-1]
    return [json.loads(line) for line in written if line.startswith("{")]


def conversation(served: Served, workspace: Path) -> str:
    with served.client() as client:
        return str(client.op(dto.CONVERSATION_CREATE,
                             dto.ConversationCreate(workspace=str(workspace))).conversation_id)


def answer_pending(served: Served, c: str) -> None:
    with served.client() as client:
        snap = client.op(dto.INPUT_GET, dto.InputGet(conversation_id=c))
        assert snap.pending is not None
        client.op(dto.INPUT_ANSWER,
                  dto.InputAnswer(conversation_id=c, request_id=snap.pending.request_id,
                                  incarnation=snap.incarnation, revision=snap.revision,
                                  option_id=snap.pending.options[0].option_id))


def test_one_document_per_question_with_every_field(tmp_path: Path, workspace: Path):
    served, out = hooked(tmp_path, "record")
    try:
        c = conversation(served, workspace)
        with served.client() as client:
            request = ask(client, c)
            expires = client.op(dto.INPUT_GET,
                                dto.InputGet(conversation_id=c)).pending.expires_at  # type: ignore[union-attr]
        (doc,) = eventually(lambda: documents(out), "the hook's document", timeout=20)
        assert doc == {
            "event": "input_requested", "conversation_id": c,
            "workspace": str(workspace.resolve()), "request_id": request, "kind": "choice",
            "prompt": "Tabs or spaces?", "options": ["tabs", "spaces"],
            "expires_at": expires, "asked_by": "Clankie",
            "read_with": f"clankie conversations questions {c} --request {request}"}
        answer_pending(served, c)  # the continuation asks again: a second document
        second = eventually(lambda: documents(out)[1:], "the second document", timeout=20)
        assert [d["event"] for d in documents(out)] == ["input_requested"] * 2  # no ending
        assert second[0]["request_id"] != request
    finally:
        assert served.stop() == 0


def test_h7_with_web_origin_the_document_has_answer_url_and_no_credential(
        tmp_path: Path, workspace: Path):
    origin = "https://laptop.tailnet-name.ts.net"
    served, out = hooked(tmp_path, "record", CLANKIE_WEB_ORIGIN=origin)
    try:
        c = conversation(served, workspace)
        with served.client() as client:
            ask(client, c)
        (doc,) = eventually(lambda: documents(out), "the hook's document", timeout=20)
        assert doc["answer_url"] == f"{origin}/?c={c}&r={doc['request_id']}"
        token = served.home.token_file.read_text().strip()
        assert token not in json.dumps(doc) and "clk_" not in json.dumps(doc)
    finally:
        assert served.stop() == 0


def test_notify_on_resolved_adds_one_document_per_ending(tmp_path: Path, workspace: Path):
    served, out = hooked(tmp_path, "record", CLANKIE_NOTIFY_ON_RESOLVED="true")
    try:
        c = conversation(served, workspace)
        with served.client() as client:
            request = ask(client, c)
        answer_pending(served, c)
        eventually(lambda: documents(out), "three documents", timeout=20,
                   until=lambda docs: len(docs) >= 3)
        events = [(d["event"], d.get("outcome")) for d in documents(out)]
        assert events[:3] == [("input_requested", None), ("input_resolved", "answered"),
                              ("input_requested", None)]
        assert documents(out)[1]["request_id"] == request
        # Issue 42: the ending is the receipt's, as data: who answered and the run it
        # started, as `input_get` gives them, never to be taken from words.
        with served.client() as client:
            receipt = client.call("input_get", {"conversation_id": c,
                                                "request_id": request})["request"]["receipt"]
        resolved = documents(out)[1]
        fields = ("receipt_id", "answered_by", "run_id")
        assert {k: resolved[k] for k in fields} == {k: receipt[k] for k in fields}
        assert "answer" not in resolved  # never the answer to a hook (test_p3_... below)
        assert resolved["answered_by"]["kind"] == "operator", resolved
    finally:
        assert served.stop() == 0


def _path_of_one_question(served: Served, workspace: Path) -> tuple[list[str], int]:
    """Ask, answer, let the continuation ask again: the event types and the revision."""
    c = conversation(served, workspace)
    with served.client() as client:
        ask(client, c)
        answer_pending(served, c)
        settle(client, c)
        events = client.call("events_tail", {"conversation_id": c, "limit": 500})["events"]
        return [e["type"] for e in events], client.op(dto.INPUT_GET,
                                                      dto.InputGet(conversation_id=c)).revision


def test_a_hanging_failing_or_missing_hook_changes_nothing(tmp_path: Path, workspace: Path):
    plain = Served.start(tmp_path / "home-plain")
    try:
        expected = _path_of_one_question(plain, workspace)
    finally:
        assert plain.stop() == 0
    for mode in ("hang", "fail", "missing"):
        served, _ = hooked(tmp_path, mode) if mode != "missing" else (Served.start(
            tmp_path / "home-missing",
            env={"CLANKIE_NOTIFY_COMMAND": '["/nonexistent/notify-me"]'}), None)
        try:
            assert _path_of_one_question(served, workspace) == expected, mode
        finally:
            assert served.stop(timeout=20) == 0, mode  # a hanging hook never holds a stop
        log = "".join(served.log)
        reason = {"hang": None, "fail": "exited 1: the hook broke",
                  "missing": "/nonexistent/notify-me could not run"}[mode]
        assert reason is None or reason in log, log


def test_a_storm_of_questions_runs_at_most_the_bound_at_once(tmp_path: Path, workspace: Path):
    served, out = hooked(tmp_path, "slow")
    try:
        made = [conversation(served, workspace) for _ in range(50)]
        with served.client() as client:
            for c in made:
                client.call("conversation_send", {"conversation_id": c, "text": "ask"})
        eventually(lambda: documents(out), "fifty documents", timeout=60,
                   until=lambda docs: len(docs) == 50)
        running = peak = 0
        for line in out.read_text().splitlines():
            running += {"+": 1, "-": -1}.get(line, 0)
            peak = max(peak, running)
        assert 1 < peak <= MAX_RUNNING
        assert sorted(d["conversation_id"] for d in documents(out)) == sorted(made)
    finally:
        assert served.stop() == 0


def test_t4_a_hook_gets_no_token_no_key_and_nothing_it_was_not_allowed(
        tmp_path: Path, workspace: Path):
    served, out = hooked(tmp_path, "env", CLANKIE_TOKEN="tok-never-to-a-hook",
                         OPENAI_API_KEY="sk-never-to-a-hook", ANTHROPIC_API_KEY="sk-ant-never",
                         SOME_SECRET="s3cret", LC_ALL="C.UTF-8")
    try:
        c = conversation(served, workspace)
        with served.client() as client:
            ask(client, c)
        (seen,) = eventually(lambda: [json.loads(line) for line in out.read_text().splitlines()]
                             if out.exists() else [], "the hook's environment", timeout=20)
        assert "never" not in json.dumps(seen) and "s3cret" not in json.dumps(seen)
        assert not {"CLANKIE_TOKEN", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "SOME_SECRET"} & set(
            seen)
        assert seen["PATH"] and seen["LC_ALL"] == "C.UTF-8"
    finally:
        served.stop()


def test_t4_t5_a_flooding_hook_is_read_up_to_64_kib_and_said_visibly_in_the_log(
        tmp_path: Path, workspace: Path):
    served, out = hooked(tmp_path, "flood")
    try:
        c = conversation(served, workspace)
        with served.client() as client:
            ask(client, c)
        eventually(lambda: out.read_text() if out.exists() else None, "the flood", timeout=20,
                   until=lambda text: text == "flooded\n")
        assert served.reader is not None
        line = served.reader.until(lambda line: "notify:" in line and "exited 3" in line, 30)
        assert "\\x1b[2J" in line and "\x1b" not in line  # visible, never raw
        peak = int(next(row.split()[1] for row in
                        Path(f"/proc/{served.proc.pid}/status").read_text().splitlines()
                        if row.startswith("VmHWM:")))
        assert peak < 300 * 1024, f"the service grew to {peak} KiB"  # 200 MB were written
    finally:
        served.stop()


def test_p3_an_agents_question_reaches_the_notifier_with_who_asks(
        tmp_path: Path, workspace: Path):
    """SPEC P3: the notifier shows who asks: the agent credential's name, the MCP client's
    name and the workspace (`asker`, and `asked_by` in the words the TUI and the CLI use);
    the question is read and answered as any other (`read_with`). Its ending says who
    asked too (with `notify_on_resolved`)."""
    served, out = hooked(tmp_path, "record", CLANKIE_NOTIFY_ON_RESOLVED="true")
    try:
        with served.client() as owner:
            made = owner.call("credential_issue", {"kind": "agent", "name": "coder"})
        with served.client(token=made["token"]) as agent:
            asked = agent.call("agent_ask", {
                "workspace": str(workspace), "client": "claude-code", "kind": "text",
                "prompt": "May I rename the module?"})
        c, r = asked["conversation_id"], asked["request_id"]
        (doc,) = eventually(lambda: documents(out), "the hook's document", timeout=20)
        who = {"credential_id": made["credential_id"], "name": "coder",
               "client": "claude-code"}
        assert doc == {**doc, "event": "input_requested", "conversation_id": c,
                       "request_id": r, "workspace": str(workspace.resolve()),
                       "asker": who, "asked_by": 'agent "coder" through "claude-code"',
                       "prompt": "May I rename the module?", "kind": "text", "options": [],
                       "read_with": f"clankie conversations questions {c} --request {r}"}
        with served.client() as owner:
            snap = owner.op(dto.INPUT_GET, dto.InputGet(conversation_id=c))
            owner.op(dto.INPUT_ANSWER,
                     dto.InputAnswer(conversation_id=c, request_id=r,
                                     incarnation=snap.incarnation, revision=snap.revision,
                                     text="yes, call it shop"))
        docs = eventually(lambda: documents(out), "the ending's document", timeout=20,
                          until=lambda docs: len(docs) == 2)
        assert docs[1] == {**docs[1], "event": "input_resolved", "outcome": "answered",
                           "asker": who, "asked_by": 'agent "coder" through "claude-code"'}
        assert "yes, call it shop" not in json.dumps(docs)  # no answer text to a hook
        assert made["token"] not in json.dumps(docs)
    finally:
        assert served.stop() == 0


# What breaks or spoofs a line a hook shows: line breaks of every kind, terminal escapes,
# a bell, bidirectional overrides and isolates, zero-width characters, quotes, backslashes.
HOSTILE = "\r\n\x0b\x0c\x1c\x85\u2028\u2029\t\x1b[2J\x07\x9b\u202e\u2066\u200b\u200d\"\\ ab"


def test_p3_section10_asked_by_is_one_visible_line_whatever_names_an_agent_chose(
        tmp_path: Path, workspace: Path):
    """Issue 42: `asked_by` carried the credential's and the MCP client's names raw, so a
    `clientInfo.name` with CR LF, ESC, BEL or U+202E broke or spoofed the one line of "who
    asks" a hook shows. It is escaped as every other surface escapes text from others
    (section 10): one line, nothing that acts on a terminal or reorders text, in quotes a
    name cannot end; the raw `asker` fields stay exact."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from clankie.text import visible

    quoted = r'"(?:[^"\\]|\\.)*"'
    shape = re.compile(rf"agent {quoted} through {quoted}")
    names = st.one_of(
        st.text(alphabet=HOSTILE, min_size=1, max_size=40),
        st.text(alphabet=st.characters(exclude_categories=("Cs",), exclude_characters="\x00"),
                min_size=1, max_size=40))
    served, out = hooked(tmp_path, "record")
    try:
        with served.client() as owner:

            @settings(max_examples=25, deadline=None,
                      suppress_health_check=[HealthCheck.function_scoped_fixture])
            @given(name=names, client=names)
            def asks(name: str, client: str) -> None:
                made = owner.call("credential_issue", {"kind": "agent", "name": name})
                with served.client(token=made["token"]) as agent:
                    r = agent.call("agent_ask", {
                        "workspace": str(workspace), "client": client, "kind": "text",
                        "prompt": "May I rename the module?"})["request_id"]
                doc = eventually(lambda: [d for d in documents(out) if d["request_id"] == r],
                                 "the hook's document", timeout=20)[0]
                assert doc["asker"] == {"credential_id": made["credential_id"], "name": name,
                                        "client": client}  # exact, as the agent chose
                said = doc["asked_by"]
                assert len(said.splitlines()) == 1 and "\t" not in said, repr(said)
                assert visible(said) == said, repr(said)  # nothing left to make visible
                assert shape.fullmatch(said), repr(said)  # neither name ends its quotes

            asks()
    finally:
        assert served.stop() == 0
