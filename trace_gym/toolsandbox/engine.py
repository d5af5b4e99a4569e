"""The ToolSandbox message bus and the replay of recorded trajectories.

:class:`Sandbox` is one episode: the message bus (rows with upstream's columns), the
world databases and the tools the agent may call.  Agents and users act through it:

* :meth:`Sandbox.agent_calls` -- one agent turn with one or more tool calls.  Each call
  becomes an ``AGENT → EXECUTION_ENVIRONMENT`` row whose content is the Python snippet
  upstream's agents emit; the execution environment answers every call with a row
  carrying the result's ``repr`` (or the error line) and the tool trace.  Several calls
  are a parallel call: they are run in every order on copies of the world, and the
  first order that fails (if any) is the one kept, answers in that order.  Naming a
  tool that is not offered aborts the episode (:class:`EpisodeAborted`), as upstream;
  :meth:`Sandbox.unknown_calls` lets a caller refuse such calls instead.
* :meth:`Sandbox.agent_message`, :meth:`Sandbox.user_message`,
  :meth:`Sandbox.end_conversation`.

:func:`replay` drives a sandbox from the corpus ``steps`` format and returns the bus,
the snapshots and bookkeeping (:class:`ReplayResult`).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .catalog import Catalog, load_catalog
from .toolbox import unknown_tool_error
from .tools import ToolOutcome, run_tool
from .world import REFERENCE_NOW, World, counter_ids

__all__ = ["Sandbox", "EpisodeAborted", "ReplayResult", "replay", "world_index", "MAX_PARALLEL_PERMUTED"]

AGENT, USER, EE, SYSTEM = "AGENT", "USER", "EXECUTION_ENVIRONMENT", "SYSTEM"
# Parallel calls with more than this many calls are only run in the requested order
# (n! orders would be run otherwise).
MAX_PARALLEL_PERMUTED = 6


class EpisodeAborted(Exception):
    """The episode cannot go on (upstream's runner scores it 0 with the maximum turn count)."""

    def __init__(self, type_name: str, message: str):
        super().__init__(message)
        self.type_name = type_name
        self.message = message

    def as_dict(self) -> dict[str, str]:
        return {"type": self.type_name, "message": self.message, "phase": "play"}


def world_index(sandbox_rows: Sequence[Mapping[str, Any]]) -> int:
    """Where upstream stores the scenario's world rows: the row after the few-shot ``end_conversation()``."""
    for i, row in enumerate(sandbox_rows):
        if row["sender"] == USER and row["recipient"] == EE:
            return i + 1
    return max(0, len(sandbox_rows) - 2)


def _row(index: int, sender: str, recipient: str, content: Any, *, call_id: str | None = None,
         function: str | None = None, active: bool = True, exception: str | None = None,
         trace: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "sandbox_message_index": index, "sender": sender, "recipient": recipient, "content": content,
        "openai_tool_call_id": call_id, "openai_function_name": function, "conversation_active": active,
        "tool_call_exception": exception, "tool_trace": trace, "visible_to": [sender, recipient],
    }


def _json_roundtrip(value: Any) -> Any:
    return json.loads(json.dumps(value))


@dataclass
class Sandbox:
    """One ToolSandbox episode: message bus, world and the agent's tools."""

    scenario: Any  # trace_gym.toolsandbox.scenarios.Scenario
    cat: Catalog
    messages: list[dict[str, Any]]
    world: World
    agent_tools: dict[str, str]  # agent-facing name -> tool name
    max_messages: int
    first_new_index: int
    active: bool = True
    end_calls: int = 0
    exception: EpisodeAborted | None = None
    message_steps: dict[int, int | None] = field(default_factory=dict)

    @classmethod
    def start(cls, scenario: Any, *, cat: Catalog | None = None, now: float = REFERENCE_NOW,
              new_id: Any = None, agent_tools: Mapping[str, str] | None = None,
              max_messages: int | None = None) -> Sandbox:
        """A fresh episode of ``scenario`` (a :class:`~trace_gym.toolsandbox.scenarios.Scenario`)."""
        cat = cat or load_catalog()
        rows = scenario.sandbox_rows()
        world_rows = {db: scenario.world_rows(db) for db in ("SETTING", "CONTACT", "MESSAGING", "REMINDER")}
        world = World.from_scenario(world_rows, world_index(rows), now=now, new_id=new_id or counter_ids())
        tools = dict(agent_tools) if agent_tools is not None else {n: n for n in scenario.agent_tools}
        return cls(
            scenario=scenario, cat=cat, messages=rows, world=world, agent_tools=tools,
            max_messages=int(max_messages if max_messages is not None else scenario.max_messages),
            first_new_index=len(rows),
        )

    # ------------------------------------------------------------------ state
    @property
    def new_count(self) -> int:
        return len(self.messages) - self.first_new_index

    @property
    def at_cap(self) -> bool:
        return self.new_count >= self.max_messages

    @property
    def next_index(self) -> int:
        return len(self.messages)

    @property
    def last_recipient(self) -> str:
        return self.messages[-1]["recipient"]

    def _add(self, row: dict[str, Any], step: int | None) -> dict[str, Any]:
        self.messages.append(row)
        self.message_steps[row["sandbox_message_index"]] = step
        return row

    def db_snapshots(self) -> dict[str, list[dict[str, Any]]]:
        return self.world.snapshots()

    # ------------------------------------------------------------------ agent
    def unknown_calls(self, calls: Sequence[tuple[str, str, Any]]) -> list[str]:
        """The agent-facing names in ``calls`` that are not offered tools (nothing changes)."""
        return [name for _, name, _ in calls if name not in self.agent_tools]

    def check_calls(self, calls: Sequence[tuple[str, str, Any]]) -> None:
        """Raise :class:`EpisodeAborted` (and record it) if a call names a tool that is not offered."""
        for name in self.unknown_calls(calls)[:1]:
            line = unknown_tool_error(name, self.agent_tools)
            type_name, _, message = line.partition(": ")
            self.exception = EpisodeAborted(type_name, message)
            self.active = False
            raise self.exception

    def emit_calls(self, calls: Sequence[tuple[str, str, Any]], step: int | None = None) -> list[dict[str, Any]]:
        """The agent's call rows (after :meth:`check_calls`)."""
        rows = []
        for call_id, name, args in calls:
            args = _json_roundtrip(args)
            tool = self.agent_tools[name]
            content = (f"{call_id}_parameters = {args!r}\n{call_id}_response = {tool}(**{call_id}_parameters)\n"
                       f"print(repr({call_id}_response))")
            rows.append(self._add(_row(self.next_index, AGENT, EE, content, call_id=call_id, function=name), step))
        return rows

    def answer_calls(self, calls: Sequence[tuple[str, str, Any]], step: int | None = None) -> list[dict[str, Any]]:
        """The execution environment runs the pending calls and answers each one."""
        jobs = [(call_id, name, self.agent_tools[name], _json_roundtrip(args)) for call_id, name, args in calls]
        self.world.write_index = self.next_index
        if len(jobs) == 1:
            order = [0]
            outcomes = [self._run(jobs[0], self.world)]
        else:
            order, outcomes, self.world = self._run_parallel(jobs)
        rows = []
        for j, out in zip(order, outcomes, strict=False):
            call_id, name, tool, _ = jobs[j]
            trace = None if out.error else [{"tool_name": tool, "arguments": out.trace_arguments, "result": out.result}]
            rows.append(self._add(_row(self.next_index, EE, AGENT, out.content, call_id=call_id, function=name,
                                       exception=out.error, trace=trace), step))
        return rows

    def agent_calls(self, calls: Sequence[tuple[str, str, Any]], step: int | None = None) -> list[dict[str, Any]]:
        """Call rows plus their answers (raises :class:`EpisodeAborted` on a tool that is not offered)."""
        self.check_calls(calls)
        self.emit_calls(calls, step)
        return self.answer_calls(calls, step)

    def _run(self, job: tuple[str, str, str, Any], world: World) -> ToolOutcome:
        _, _, tool, args = job
        return run_tool(self.cat.specs[tool], world, self.cat.kb, args)

    def _run_parallel(self, jobs: list[tuple[str, str, str, Any]]) -> tuple[list[int], list[ToolOutcome], World]:
        original = self.world.copy()
        first: tuple[list[int], list[ToolOutcome], World] | None = None
        orders = (itertools.permutations(range(len(jobs))) if len(jobs) <= MAX_PARALLEL_PERMUTED
                  else iter([tuple(range(len(jobs)))]))
        for i, perm in enumerate(orders):
            world = original.copy()
            outs = [self._run(jobs[j], world) for j in perm]
            if i == 0:
                first = (list(perm), outs, world)
            if any(o.error for o in outs):
                return list(perm), outs, world
        assert first is not None
        return first

    def agent_message(self, content: str, step: int | None = None) -> dict[str, Any]:
        return self._add(_row(self.next_index, AGENT, USER, content), step)

    # ------------------------------------------------------------------ user
    def user_message(self, content: str, step: int | None = None) -> dict[str, Any]:
        return self._add(_row(self.next_index, USER, AGENT, content), step)

    def end_call(self, step: int | None = None) -> dict[str, Any]:
        """The user's ``end_conversation()`` call row (answered by :meth:`end_answer`)."""
        k = self.end_calls
        self.end_calls += 1
        cid = f"end_{k}"
        content = f"{cid}_parameters = {{}}\n{cid}_response = end_conversation(**{cid}_parameters)\nprint(repr({cid}_response))"
        return self._add(_row(self.next_index, USER, EE, content, call_id=cid, function="end_conversation", active=False), step)

    def end_answer(self, step: int | None = None) -> dict[str, Any]:
        cid = self.messages[-1]["openai_tool_call_id"]
        self.active = False
        trace = [{"tool_name": "end_conversation", "arguments": {}, "result": None}]
        return self._add(_row(self.next_index, EE, USER, "None", call_id=cid, function="end_conversation",
                              active=False, trace=trace), step)

    def end_conversation(self, step: int | None = None) -> list[dict[str, Any]]:
        rows = [self.end_call(step)]
        if not self.at_cap:
            rows.append(self.end_answer(step))
        else:
            self.active = False
        return rows


@dataclass
class ReplayResult:
    """A replayed episode: the bus, the snapshots and what was (not) consumed."""

    sandbox: Sandbox
    unused_agent_steps: int
    unused_user_steps: int

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.sandbox.messages

    @property
    def db_snapshots(self) -> dict[str, list[dict[str, Any]]]:
        return self.sandbox.db_snapshots()

    @property
    def exception(self) -> dict[str, str] | None:
        return self.sandbox.exception.as_dict() if self.sandbox.exception else None

    @property
    def message_steps(self) -> dict[int, int | None]:
        return dict(self.sandbox.message_steps)


def _calls(step: Mapping[str, Any]) -> list[tuple[str, str, Any]]:
    return [(c["id"], c["name"], c.get("arguments", {})) for c in step.get("calls", [])]


def replay(scenario: Any, steps: Sequence[Mapping[str, Any]], *, cat: Catalog | None = None,
           now: float = REFERENCE_NOW) -> ReplayResult:
    """Drive a fresh sandbox of ``scenario`` with scripted agent and user ``steps`` (corpus format)."""
    sb = Sandbox.start(scenario, cat=cat, now=now)
    agent = [(i, s) for i, s in enumerate(steps) if s.get("role") == "agent"]
    user = [(i, s) for i, s in enumerate(steps) if s.get("role") == "user"]
    ai = ui = 0
    pending: tuple[list[tuple[str, str, Any]], int] | None = None  # calls awaiting the environment
    end_pending: tuple[int | None] | None = None  # (step index,) of an end_conversation awaiting its answer
    while sb.active and not sb.at_cap:
        if pending is not None:
            calls, idx = pending
            pending = None
            sb.answer_calls(calls, idx)
        elif end_pending is not None:
            sb.end_answer(end_pending[0])
            end_pending = None
        elif sb.last_recipient == AGENT:
            if ai >= len(agent):
                break
            idx, step = agent[ai]
            ai += 1
            if step.get("type") == "tool_calls":
                calls = _calls(step)
                try:
                    sb.check_calls(calls)
                except EpisodeAborted:
                    break
                sb.emit_calls(calls, idx)
                pending = (calls, idx)
            else:
                sb.agent_message(step.get("content", ""), idx)
        elif sb.last_recipient == USER:
            if ui < len(user):
                idx, step = user[ui]
                ui += 1
                if step.get("type") == "end_conversation":
                    sb.end_call(idx)
                    end_pending = (idx,)
                    continue
                sb.user_message(step.get("content", ""), idx)
            else:
                sb.end_call(None)
                end_pending = (None,)
        else:
            break
    return ReplayResult(sb, len(agent) - ai, len(user) - ui)
