"""``trace/toolsandbox-v0``: ToolSandbox scenarios as a Gymnasium text environment.

Each episode is one base scenario (``options={"scenario": name}``, or a seeded choice,
optionally within ``options={"category": ...}``).  The agent sees the scenario's system
prompt, its allowed tools (OpenAI schemas) and the scripted first user message.

* A tool call runs on the episode's :class:`~trace_gym.toolsandbox.engine.Sandbox`
  exactly as upstream would: same results and error lines, and several calls in one
  action are a parallel call (permutation rule).  A call to a tool that is not offered
  gets an error tool result (upstream's ``KeyError`` line) and changes nothing, neither
  the world nor the message bus; ``unknown_tool="abort"`` instead aborts the episode
  with reward 0 and the maximum turn count, as upstream's runner does.
* A text message goes to the user (a :class:`~trace_gym.core.users.UserSimulator`), who
  answers or ends the conversation: ``user="offline"`` (the default,
  :class:`~trace_gym.toolsandbox.offline_user.OfflineUser`: plays the scenario's user side
  from its task text, no model, deterministic), ``"scripted"`` (ends after the agent's
  first answer), ``"llm-openai"`` / ``"llm-hf"`` (an LLM plays the user) or any simulator.  The bus is capped at the scenario's ``max_messages`` new messages.
* At the end the episode is scored by upstream's evaluator
  (:func:`trace_gym.toolsandbox.evaluation.evaluate`): reward = similarity, and
  ``info["reward_info"]`` holds the milestone and minefield scores with the message
  index and env step each milestone was matched to.  Every value keeps its type from
  episode to episode (so ``gym.make_vec`` can stack infos): ``step`` is ``-1`` for a
  message no env step produced, ``aborted`` is a bool and ``exception`` a string
  (``""``, or ``"KeyError: ..."`` for an aborted episode).

Tool augmentations (reset options or constructor defaults):
``distraction_tools`` = 3, 10 or ``"all"`` adds upstream's distraction tools;
``scramble`` = ``"tool_name"``, ``"tool_description"``, ``"arg_description"`` or
``"arg_type"`` shows upstream's scrambled views of the tools.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from trace_gym.core import EpisodeOpening, ToolEnv, ToolResult, ToolSet

from .catalog import Catalog, load_catalog
from .data import thaw
from .engine import EpisodeAborted, Sandbox
from .toolbox import core_tool, unknown_tool_error
from .users import LLMUser, OfflineUser, ScriptedUser, UserSimulator

__all__ = ["ToolSandboxEnv", "SCRAMBLES", "DISTRACTIONS"]

SCRAMBLES = ("tool_name", "tool_description", "arg_description", "arg_type")
DISTRACTIONS = {3: "3_distraction_tools", 10: "10_distraction_tools", "all": "all_tools"}
_WORLD = frozenset({"SETTING", "CONTACT", "MESSAGING", "REMINDER"})
UNKNOWN_TOOL = ("error", "abort")
USERS = ("offline", "scripted", "llm-openai", "llm-hf")


def _make_user(user: str | UserSimulator, model: str | None, base_url: str | None, api_key: str | None) -> UserSimulator:
    if not isinstance(user, str):
        if not isinstance(user, UserSimulator):
            raise TypeError(f"user must be one of {USERS} or a UserSimulator, got {type(user).__name__}")
        return user
    if user == "offline":
        return OfflineUser()
    if user == "scripted":
        return ScriptedUser()
    if user in ("llm-openai", "llm-hf"):
        if not model:
            raise ValueError(f"user={user!r} needs user_model")
        from trace_gym.llm import HFChatClient, OpenAIChatClient

        client = (OpenAIChatClient(base_url or "http://localhost:8000/v1", model, api_key=api_key, temperature=0.0,
                                   max_tokens=256, timeout=60.0)
                  if user == "llm-openai" else HFChatClient(model))
        return LLMUser(client)
    raise ValueError(f"unknown user {user!r}; expected one of {USERS} or a UserSimulator")


def _step(step: int | None) -> int:
    return -1 if step is None else int(step)


class ToolSandboxEnv(ToolEnv):
    """One ToolSandbox scenario per episode, scored like upstream.

    Args:
        scenario: play this scenario at every reset that names none.
        category: draw scenarios of this category (e.g. ``"multiple_user_turn"``).
        scenarios: the pool scenarios are drawn from (default: all 129).
        user: the user side: ``"offline"`` (deterministic, no model), ``"scripted"`` (ends after the agent's
            first answer), ``"llm-openai"`` / ``"llm-hf"`` (an LLM plays the user) or a ``UserSimulator``.
        user_model: the model of an LLM user.
        user_base_url: the endpoint of an ``"llm-openai"`` user (default ``http://localhost:8000/v1``).
        user_api_key: the API key of an ``"llm-openai"`` user.
        distraction_tools: add upstream's distraction tools: 3, 10 or ``"all"``.
        scramble: show upstream's scrambled view of the tools: ``"tool_name"``, ``"tool_description"``,
            ``"arg_description"`` or ``"arg_type"``.
        unknown_tool: a call to a tool the scenario does not offer gets an error result (``"error"``) or ends
            the episode with similarity 0 as upstream's runner does (``"abort"``).
    """

    reset_option_keys = frozenset({"scenario", "category", "distraction_tools", "scramble"})
    termination_reasons = {
        "user_ended": "the user side ended the conversation",
        "max_messages": "the scenario's cap on new messages was reached",
        "aborted": "`unknown_tool=\"abort\"`: the agent called a tool the scenario does not offer (similarity 0)",
        "max_steps": "the step limit was reached, or the caller ended the episode with `truncate()`",
    }
    reward_info_keys = {
        "scenario": "the scenario's name",
        "similarity": "the reward: the milestone similarity, or 0 when the episode hit a minefield",
        "milestone_similarity": "how closely the episode matched the scenario's milestones, in [0, 1]",
        "minefield_similarity": "how closely the episode matched a minefield (0: none was hit)",
        "turn_count": "the conversation's turns, as upstream counts them",
        "milestones": "per milestone: its score, the message it matched and the env step (-1: none)",
        "minefields": "per minefield: the same",
        "aborted": "whether the episode was aborted (`unknown_tool=\"abort\"`)",
        "exception": "the abort's error line (empty otherwise)",
    }

    def __init__(
        self,
        *,
        scenario: str | None = None,
        category: str | None = None,
        scenarios: Sequence[str] | None = None,
        user: str | UserSimulator = "offline",
        user_model: str | None = None,
        user_base_url: str | None = None,
        user_api_key: str | None = None,
        distraction_tools: int | str | None = None,
        scramble: str | None = None,
        unknown_tool: str = "error",
        max_steps: int = 30,
        render_mode: str | None = None,
    ):
        super().__init__(max_steps=max_steps, render_mode=render_mode)
        from .scenarios import load_scenarios
        from .similarity import prepare_rouge

        prepare_rouge()  # a one-off import of seconds, here rather than in the step that ends the first episode
        self._all = load_scenarios()
        self._cat: Catalog = load_catalog()
        pool = list(scenarios) if scenarios is not None else list(self._all)
        unknown = [n for n in pool if n not in self._all]
        if unknown:
            raise ValueError(f"unknown ToolSandbox scenario(s): {unknown[:5]}")
        if not pool:
            raise ValueError("the scenario pool is empty")
        self._pool = pool
        self._defaults = {"scenario": scenario, "category": category, "distraction_tools": distraction_tools,
                          "scramble": scramble}
        self._check_augmentation(distraction_tools, scramble)
        if unknown_tool not in UNKNOWN_TOOL:
            raise ValueError(f"unknown_tool must be one of {UNKNOWN_TOOL}, got {unknown_tool!r}")
        self.unknown_tool = unknown_tool
        if scenario is not None and scenario not in self._all:
            raise ValueError(f"unknown ToolSandbox scenario {scenario!r}")
        self.user = _make_user(user, user_model, user_base_url, user_api_key)
        self.scenario: Any = None
        self.sandbox: Sandbox | None = None
        self._aborted: EpisodeAborted | None = None
        self._batch: tuple[int, list[ToolResult]] | None = None

    # ------------------------------------------------------------------ setup
    @staticmethod
    def _check_augmentation(distraction: Any, scramble: Any) -> None:
        if distraction is not None and distraction not in DISTRACTIONS:
            raise ValueError(f"distraction_tools must be one of {list(DISTRACTIONS)} or None, got {distraction!r}")
        if scramble is not None and scramble not in SCRAMBLES:
            raise ValueError(f"scramble must be one of {SCRAMBLES} or None, got {scramble!r}")

    def _choose(self, options: dict[str, Any]) -> Any:
        name = options.get("scenario", self._defaults["scenario"])
        if name is not None:
            if name not in self._all:
                raise ValueError(f"unknown ToolSandbox scenario {name!r}")
            return self._all[name]
        category = options.get("category", self._defaults["category"])
        pool = self._pool
        if isinstance(category, str):
            category = category.upper()  # upstream's names are upper case; accept any case
        if category is not None:
            pool = [n for n in pool if category in self._all[n].categories]
            if not pool:
                raise ValueError(f"no scenario in the pool has category {category!r}")
        return self._all[pool[int(self.np_random.integers(len(pool)))]]

    def _agent_tools(self, scenario: Any, distraction: Any, scramble: str | None) -> list[tuple[str, str, dict[str, Any]]]:
        names = set(scenario.agent_tools)
        if distraction is not None:
            variants = scenario.augmentations.get("variants", {})
            names |= set(variants.get(DISTRACTIONS[distraction], ()))
        out = []
        for name in self._cat.specs:
            if name not in names or name == "end_conversation":
                continue
            spec = self._cat.specs[name]
            schema = thaw(spec.schema)
            facing = name
            if scramble == "tool_name":
                facing = spec.augmented_views.get("scrambled_name", name)
                schema["function"]["name"] = facing
            elif scramble is not None:
                view = spec.augmented_views.get(f"{scramble}_scrambled")
                if view:
                    schema = thaw(view)
            out.append((facing, name, schema))
        return out

    def _start(self, options: dict[str, Any]) -> EpisodeOpening:
        distraction = options.get("distraction_tools", self._defaults["distraction_tools"])
        scramble = options.get("scramble", self._defaults["scramble"])
        self._check_augmentation(distraction, scramble)
        scenario = self._choose(options)
        self.scenario = scenario
        tools = self._agent_tools(scenario, distraction, scramble)
        self.sandbox = Sandbox.start(scenario, cat=self._cat, agent_tools={f: n for f, n, _ in tools})
        self._aborted = None
        self._batch = None
        self.user.reset(scenario, None)
        toolset = ToolSet(
            core_tool(self._cat.specs[name], self._direct_call(facing), facing=facing, schema=schema)
            for facing, name, schema in tools
        )
        opening = [{"role": "user", "content": m} for m in scenario.first_user_messages]
        info = {"scenario": scenario.name, "categories": list(scenario.categories),
                "agent_tools": [f for f, _, _ in tools]}
        return EpisodeOpening(system_prompt=scenario.agent_system_prompt, tools=toolset, messages=opening, info=info)

    def _direct_call(self, facing: str) -> Any:
        def call(arguments: dict[str, Any]) -> str:
            assert self.sandbox is not None
            rows = self.sandbox.agent_calls([(f"direct_{len(self.sandbox.messages)}", facing, arguments)], self._steps)
            return rows[-1]["content"]

        return call

    # ------------------------------------------------------------------ hooks
    def _call_tool(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Run the whole batch of the current action on its first call; hand out the answers in order."""
        assert self.sandbox is not None
        if self._batch is None or self._batch[0] != self._steps:
            self._batch = (self._steps, self._run_batch())
        results = self._batch[1]
        return results.pop(0) if results else ToolResult("Error: no pending call", True)

    def _run_batch(self) -> list[ToolResult]:
        assert self.sandbox is not None
        calls_msg = self.messages[-1]
        calls = [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"] or "{}"))
                 for c in calls_msg.get("tool_calls", [])]
        if self._termination_reason is not None or not self.sandbox.active:
            return [ToolResult("Error: the conversation has ended", True) for _ in calls]
        if self.unknown_tool == "abort":
            try:
                self.sandbox.check_calls(calls)
            except EpisodeAborted as exc:
                self._aborted = exc
                self.end("aborted")
                return [ToolResult(f"Error: {exc.type_name}: {exc.message}", True) for _ in calls]
        unknown = set(self.sandbox.unknown_calls(calls))
        known = [c for c in calls if c[1] not in unknown]
        by_id: dict[str, ToolResult] = {}
        if known:  # the offered calls run as one (parallel) call; the others touch nothing
            self.sandbox.emit_calls(known, self._steps)
            for r in self.sandbox.answer_calls(known, self._steps):
                by_id[r["openai_tool_call_id"]] = ToolResult(str(r["content"]), r["tool_call_exception"] is not None)
        return [by_id[cid] if cid in by_id else
                ToolResult(f"Error: {unknown_tool_error(name, self.sandbox.agent_tools)}", True)
                for cid, name, _ in calls]

    def _respond(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        sb = self.sandbox
        assert sb is not None
        sb.agent_message(message.get("content") or "", self._steps)
        if sb.at_cap:
            self.end("max_messages")
            return []
        turn = self.user.respond(sb.messages)
        if turn.end:
            sb.end_conversation(self._steps)
            self.end("user_ended")
            return []
        sb.user_message(turn.content or "", self._steps)
        return [{"role": "user", "content": turn.content or ""}]

    def _after_step(self) -> None:
        if self.sandbox is not None and self.sandbox.at_cap:
            self.end("max_messages")

    def _evaluate(self) -> tuple[float, dict[str, Any]]:
        from .evaluation import aborted_result, evaluate

        sb = self.sandbox
        assert sb is not None and self.scenario is not None
        if self._aborted is not None:
            result = aborted_result(self.scenario, self._aborted.as_dict())
        else:
            result = evaluate(self.scenario, sb.messages, sb.db_snapshots())
        steps = sb.message_steps

        def nodes(mapping: Any) -> dict[str, dict[str, Any]]:
            return {str(k): {"score": float(s), "message_index": int(i), "step": _step(steps.get(int(i)))}
                    for k, (i, s) in mapping.items()}

        exc = result.exception
        info = {
            "scenario": self.scenario.name,
            "similarity": float(result.similarity),
            "milestone_similarity": float(result.milestone_similarity),
            "minefield_similarity": float(result.minefield_similarity),
            "turn_count": int(result.turn_count),
            "milestones": nodes(result.milestone_mapping),
            "minefields": nodes(result.minefield_mapping),
            "aborted": exc is not None,
            "exception": f"{exc.get('type', '')}: {exc.get('message', '')}" if exc is not None else "",
        }
        return float(result.similarity), info

    # ------------------------------------------------------------------ introspection
    def state_fingerprint(self) -> str:
        """A digest of the current world (latest rows of the four databases)."""
        if self.sandbox is None:
            return ""
        world = self.sandbox.world
        payload = json.dumps({db: world.rows(db) for db in ("SETTING", "CONTACT", "MESSAGING", "REMINDER")},
                             sort_keys=True, default=repr)
        return hashlib.sha256(payload.encode()).hexdigest()

    def bus(self) -> list[dict[str, Any]]:
        """The ToolSandbox message bus of the episode (upstream's columns)."""
        return list(self.sandbox.messages) if self.sandbox is not None else []

    @property
    def task_source(self):
        """The scenarios, gold references and report groups (:mod:`trace_gym.toolsandbox.tasks`)."""
        from .tasks import ToolSandboxTasks

        writes = frozenset(n for n, spec in self._cat.specs.items() if set(spec.writes) & _WORLD)
        return ToolSandboxTasks(self._all, self._pool, writes)
