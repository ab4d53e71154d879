"""The tools of one run: each model tool call dispatched, bounded and recorded (SPEC W9, W10).

Owns the `ToolBox` the turn loop is given, over the run side's `RunHooks` (`runs.py`):
`ask_question` goes to the run side (Q1-Q5); a workspace tool runs against the
conversation's workspace as bound now (W8), within the run's `run_tool_budget` of result
bytes (a list result cut to fit what is left, said in its note; past it,
`budget_exhausted`, with how much was left); every call, refused ones included, is recorded with
one `tool_activity` event. Clankie's replies go through here too, stored with the next
thing the run stores: the question it asks, the record of a tool call (before a workspace
tool starts, since it may take a while), or its finish (`unsaid`). So a run that says
something and asks writes once, not twice.
"""

from __future__ import annotations

from dataclasses import replace

from clankie.agent.tools import ASK_QUESTION
from clankie.agent.transcript import ToolCall
from clankie.core.vocabulary import Code, WorkspaceCode
from clankie.workspace import tools as workspace_tools
from clankie.workspace.deny import deny_list
from clankie.workspace.tools import Outcome, model_json, refused

from .runs import CallRecord, RunHooks, Said, ask_outcome


class RunTools:
    """One run's `ToolBox`, over the run side it was given (`RunHooks`) and its settings."""

    def __init__(self, hooks: RunHooks, run_id: str) -> None:
        self._hooks = hooks
        self._run_id = run_id
        settings = hooks.settings
        self._left = settings.run_tool_budget
        self._settings = workspace_tools.ToolSettings(deny_list(settings.workspace_deny),
                                                      hooks.home)
        self._unsaid: list[Said] = []

    def say(self, reply_id: str | None, text: str) -> None:
        """A reply of the model's, stored under the ID it was shown under (D2)."""
        self._unsaid.append((reply_id, text))

    def unsaid(self) -> tuple[Said, ...]:
        """What the run said that is not stored yet: the finish stores it."""
        return tuple(self._unsaid)

    def call(self, step: int, call: ToolCall) -> str:
        record = CallRecord(step, call.call_id, call.name, call.arguments)
        if call.name == ASK_QUESTION:
            try:
                arguments = model_json(call.arguments)
            except ValueError:  # not JSON, nested past the parser, or a lone surrogate
                outcome = refused(Code.INVALID_REQUEST, "the arguments are not JSON",
                                  "ask_question: bad arguments")
            else:  # said, asked and recorded in one transaction
                result = self._hooks.ask_question(self._run_id, arguments, record,
                                                    self.unsaid())
                self._unsaid.clear()
                return ask_outcome(result).text
        else:
            if self._unsaid:  # out before the tool starts
                self._hooks.post_replies(self._run_id, self.unsaid())
                self._unsaid.clear()
            outcome = self._workspace(call)
        self._hooks.record_tool_call(self._run_id, record, outcome, self.unsaid())
        self._unsaid.clear()
        return outcome.text

    def _workspace(self, call: ToolCall) -> Outcome:
        if self._left <= 0:
            return self._exhausted(call)
        settings = replace(self._settings, home_files=self._hooks.home_files())  # as now
        outcome = workspace_tools.call_tool(call.name, call.arguments,
                                            self._hooks.workspace_of(self._run_id), settings,
                                            room=self._left)
        size = len(outcome.text.encode("utf-8"))
        if size > self._left:  # (nothing is taken: a smaller result may still fit)
            return self._exhausted(call, size)
        self._left -= size
        return outcome

    def _exhausted(self, call: ToolCall, size: int | None = None) -> Outcome:
        said = ("this run has used its budget of tool results" if size is None else
                f"this result ({size} bytes) is more than the {self._left} bytes of tool "
                "results this run has left")
        return refused(WorkspaceCode.BUDGET_EXHAUSTED,
                       f"{said} (setting run_tool_budget); answer with what you have or ask",
                       f"{call.name[:60]}: refused budget_exhausted")
