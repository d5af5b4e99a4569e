"""``trace/toolsandbox-v0``: ToolSandbox scenarios as a Gymnasium text environment.

Each episode is one base scenario (``options={"scenario": name}``, or a seeded choice,
optionally within ``options={"category": ...}``).  The agent sees the scenario's system
prompt, its allowed tools (OpenAI schemas) and the scripted first user message.

* A tool call runs on the episode's :class:`~trace_gym.toolsandbox.engine.Sandbox`
  exactly as upstream would: same results and error lines, several calls in one action
  are a parallel call (permutation rule), and naming a tool that is not offered aborts
  the episode (reward 0), as upstream's runner does.
* A text message goes to the user (a :class:`~trace_gym.toolsandbox.users.UserSimulator`:
  offline scripted by default, or an LLM, or a replay), who answers or ends the
  conversation.  The bus is capped at the scenario's ``max_messages`` new messages.
* At the end the episode is scored by upstream's evaluator
  (:func:`trace_gym.toolsandbox.evaluation.evaluate`): reward = similarity, and
  ``info["reward_info"]`` holds the milestone and minefield scores with the message
  index and env step each milestone was matched to.

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

from trace_gym.core import Episode, Tool, ToolEnv, ToolResult, ToolSet

from .engine import Catalog, EpisodeAborted, Sandbox, catalog
from .users import HFGenerator, LLMUser, OpenAICompatibleGenerator, ScriptedUser, UserSimulator

__all__ = ["ToolSandboxEnv", "SCRAMBLES", "DISTRACTIONS"]

SCRAMBLES = ("tool_name", "tool_description", "arg_description", "arg_type")
DISTRACTIONS = {3: "3_distraction_tools", 10: "10_distraction_tools", "all": "all_tools"}
_WORLD = frozenset({"SETTING", "CONTACT", "MESSAGING", "REMINDER"})


def _make_user(user: str | UserSimulator, model: str | None, base_url: str | None, api_key: str | None) -> UserSimulator:
    if not isinstance(user, str):
        if not isinstance(user, UserSimulator):
            raise TypeError(f"user must be 'scripted', 'llm-openai', 'llm-hf' or a UserSimulator, got {type(user).__name__}")
        return user
    if user == "scripted":
        return ScriptedUser()
    if user in ("llm-openai", "llm-hf"):
        if not model:
            raise ValueError(f"user={user!r} needs user_model")
        gen = (OpenAICompatibleGenerator(model, base_url or "http://localhost:8000/v1", api_key)
               if user == "llm-openai" else HFGenerator(model))
        return LLMUser(gen)
    raise ValueError(f"unknown user {user!r}; expected 'scripted', 'llm-openai', 'llm-hf' or a UserSimulator")


class ToolSandboxEnv(ToolEnv):
    """One ToolSandbox scenario per episode, scored like upstream."""

    def __init__(
        self,
        *,
        scenario: str | None = None,
        category: str | None = None,
        scenarios: Sequence[str] | None = None,
        user: str | UserSimulator = "scripted",
        user_model: str | None = None,
        user_base_url: str | None = None,
        user_api_key: str | None = None,
        distraction_tools: int | str | None = None,
        scramble: str | None = None,
        max_steps: int = 30,
        render_mode: str | None = None,
    ):
        super().__init__(max_steps=max_steps, render_mode=render_mode)
        from .scenarios import load_scenarios

        self._all = load_scenarios()
        self._cat: Catalog = catalog()
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
            schema = json.loads(json.dumps(spec.schema))
            facing = name
            if scramble == "tool_name":
                facing = spec.augmented_views.get("scrambled_name", name)
                schema["function"]["name"] = facing
            elif scramble is not None:
                view = spec.augmented_views.get(f"{scramble}_scrambled")
                if view:
                    schema = json.loads(json.dumps(view))
            out.append((facing, name, schema))
        return out

    def _start(self, options: dict[str, Any]) -> Episode:
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
        writes = {t["name"]: set(t.get("writes") or ()) for t in self._cat.raw["tools"]}
        toolset = ToolSet(
            Tool(
                name=facing,
                description=schema["function"].get("description", ""),
                parameters=schema["function"].get("parameters", {"type": "object", "properties": {}}),
                fn=self._direct_call(facing),
                kind="write" if writes.get(name, set()) & _WORLD else "read",
                validate=lambda args: None,
            )
            for facing, name, schema in tools
        )
        # Keep the exact upstream schemas (the core would otherwise rebuild them).
        for (_facing, _, schema), tool in zip(tools, toolset, strict=False):
            tool._schema = schema
        opening = [{"role": "user", "content": m} for m in scenario.first_user_messages]
        info = {"scenario": scenario.name, "categories": list(scenario.categories),
                "agent_tools": [f for f, _, _ in tools]}
        return Episode(system_prompt=scenario.agent_system_prompt, tools=toolset, messages=opening, info=info)

    def _direct_call(self, facing: str) -> Any:
        def call(**arguments: Any) -> str:
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
        try:
            self.sandbox.check_calls(calls)
        except EpisodeAborted as exc:
            self._aborted = exc
            self.end("aborted")
            return [ToolResult(f"Error: {exc.type_name}: {exc.message}", True) for _ in calls]
        self.sandbox.emit_calls(calls, self._steps)
        rows = self.sandbox.answer_calls(calls, self._steps)
        by_id = {r["openai_tool_call_id"]: r for r in rows}
        return [ToolResult(str(by_id[cid]["content"]), by_id[cid]["tool_call_exception"] is not None)
                for cid, _, _ in calls]

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
            return {str(k): {"score": float(s), "message_index": int(i), "step": steps.get(int(i))}
                    for k, (i, s) in mapping.items()}

        info = {
            "scenario": self.scenario.name,
            "similarity": float(result.similarity),
            "milestone_similarity": float(result.milestone_similarity),
            "minefield_similarity": float(result.minefield_similarity),
            "turn_count": int(result.turn_count),
            "milestones": nodes(result.milestone_mapping),
            "minefields": nodes(result.minefield_mapping),
            "exception": dict(result.exception) if result.exception is not None else None,
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
