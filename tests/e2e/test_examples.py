"""docs/cli.md's worked example of the `--script` format (SPEC section 10 "Models") runs as
shown: `clankie serve --script examples/ask-license.json`, then a message, the question, an
answer with `--choice 2` and Clankie's reply using `{answer}` and `{tool_summary}`."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.served import Served, finished
from tests.e2e.test_agent import messages_by_clankie
from tests.e2e.test_cli import answer_args, cli, ok_json

EXAMPLE = "examples/ask-license.json"  # relative to the checkout, as docs/cli.md says it


def test_the_readme_example_script_runs_with_clankie_serve(tmp_path: Path, workspace: Path):
    (workspace / "README.md").write_text("# A project without a license\n")
    served = Served.start(tmp_path / "home", "--script", EXAMPLE, script=None)
    try:
        c = cli(served, "conversations", "new", "--workspace", str(workspace)).stdout.strip()
        sent = ok_json(served, "conversations", "send", c, "Add a license, please.")
        with served.client() as client:
            assert finished(client, sent["run_id"])["status"] == "succeeded"
        looked, found = messages_by_clankie(served, c)
        assert looked == "Let me look at the project first."
        # {tool_summary}: the listing in words, not its JSON (issue 19)
        assert found == "I found: README.md (1 entry)"

        snap = ok_json(served, "conversations", "questions", c)
        question = snap["pending"]
        assert question["prompt"] == "Which license should this project use?"
        assert [o["label"] for o in question["options"]] == ["MIT", "Apache-2.0"]
        assert question["allow_text"] is True
        reply = ok_json(served, *answer_args(c, question["request_id"], snap), "--choice", "2")
        with served.client() as client:
            continuation = finished(client, reply["receipt"]["run_id"])
        assert (continuation["kind"], continuation["status"]) == ("continuation", "succeeded")
        assert messages_by_clankie(served, c)[-1] == (
            "Noted: Apache-2.0. I will keep that in mind for this project.")
    finally:
        assert served.stop() == 0
