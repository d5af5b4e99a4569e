"""``CapabilityEnv``: a Gymnasium environment compiled from a capability spec.

Each ``reset(seed=...)`` draws a fresh synthetic database, a case and its slots (all
from ``self.np_random``), builds the system prompt from the domain policy (plus, on a
fraction of episodes, the spec's hint), and opens with the user's request.  The agent
uses the target benchmark's tools with their exact schemas; a scripted user (or a
simulator policy) answers its messages; the reward is the spec's weighted capability
checks, reported component by component in ``info["reward_info"]`` at the end.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from ..core.env import EpisodeOpening, ToolEnv
from ..core.toolcalls import format_tool_call
from ..core.tools import ToolResult, ToolSet
from .domain import copy_db
from .domains import DomainBackend, get_domain
from .rewards import EpisodeLog, evaluate_rewards
from .scenario import Scenario, UnsolvableScenarioError, bind_scenario, choose_case
from .spec import CapabilitySpec, load_spec, resolve_number
from .user import ScriptedUser, SimulatedUser

__all__ = ["CapabilityEnv", "UnsolvableScenarioError"]

_SPEC_CACHE: dict[tuple[str, float], CapabilitySpec] = {}


def _get_spec(spec: str | Path | CapabilitySpec | dict[str, Any]) -> CapabilitySpec:
    if isinstance(spec, CapabilitySpec):
        return spec
    if isinstance(spec, dict):
        from .spec import parse_spec

        return parse_spec(spec)
    p = Path(spec)
    key = (str(p.resolve()), p.stat().st_mtime if p.exists() else 0.0)
    if key not in _SPEC_CACHE:
        _SPEC_CACHE[key] = load_spec(p)
    return _SPEC_CACHE[key]


class CapabilityEnv(ToolEnv):
    """Text-in, text-out training environment for one capability spec.

    Args:
        spec: path of a spec file, a parsed document, or a :class:`CapabilitySpec`.
        difficulty: knob overrides (``{"distractors": 4}``), range-checked against the spec.
        hint_fraction: overrides the spec's fraction of episodes that show the hint.
        max_steps: overrides the spec's step limit.
        user_simulator: an object with ``act(messages, tools) -> str`` that plays the user
            when the spec gives simulator instructions (otherwise the scripted user plays).
        verify_reference: dry-run the reference solution's calls at reset and reject the
            seed if one fails (on by default).

    The spec's domain (:func:`~trace_gym.capabilities.domains.get_domain`) supplies the tools,
    the synthetic database, the backend calls run on and the system prompt: for τ²-bench
    domains the project's τ²-bench engine with the episode's database injected
    (:class:`~trace_gym.capabilities.backend.EngineBackend`), for ``toolsandbox`` ToolSandbox's
    tools over a synthetic world (:mod:`~trace_gym.capabilities.ts_domain`); for ``telecom`` the
    engine on the agent's records *and* the user's phone (dual control,
    :mod:`~trace_gym.capabilities.dual_control`): the scripted user's ``do`` rules run the user's
    own tools on the phone, logged as ``user_call`` events.  A missing data
    folder raises :class:`~trace_gym.data.DataDirError` here, naming the path.
    """

    reset_option_keys = frozenset({"difficulty", "case", "hint", "scenario_seed"})
    termination_reasons = {
        "user_stop": "the user side ended the conversation (a rule marked `end`, its `max_turns`, or a simulated "
                     "user's stop token)",
        "transfer": "a successful `transfer_to_human_agents` call",
        "max_steps": "the spec's step limit was reached, or the caller ended the episode with `truncate()`",
    }
    reward_info_keys = {
        "components": "each reward check of the episode's case, by name: its score in [0, 1]",
        "weights": "the weight of each check that is not a gate",
        "gates": "the checks that multiply the reward (a gate at 0 makes the reward 0)",
        "reward": "the product of the gates times the weighted mean of the other checks",
        "case": "the case the episode drew",
    }

    def __init__(
        self,
        spec: str | Path | CapabilitySpec | dict[str, Any],
        *,
        difficulty: dict[str, float] | None = None,
        hint_fraction: float | None = None,
        max_steps: int | None = None,
        user_simulator: Any = None,
        verify_reference: bool = True,
        render_mode: str | None = None,
        **kwargs: Any,
    ):
        self.cap_spec = _get_spec(spec)
        self._default_knobs = self.cap_spec.knobs()
        self.knob_values = self.cap_spec.knobs(difficulty)
        self._fixed_max_steps = max_steps
        steps = max_steps if max_steps is not None else int(resolve_number(self.cap_spec.data.get("max_steps", 30), self.knob_values))
        # a step limit given here is checked by ToolEnv (>= 1); the spec's own is at least 1
        super().__init__(max_steps=steps if max_steps is not None else max(1, steps), render_mode=render_mode, **kwargs)
        if hint_fraction is not None and not 0.0 <= hint_fraction <= 1.0:
            raise ValueError(f"hint_fraction must be in [0, 1], got {hint_fraction}")
        self._fixed_hint_fraction = hint_fraction
        self.hint_fraction = self._hint_fraction(self.knob_values)
        self.user_simulator = user_simulator
        self.verify_reference = verify_reference
        self._domain = get_domain(self.cap_spec.domain)  # the domain answers for tools, data, backend, prompt
        self._domain_tools = self._domain.tools(self.cap_spec.tool_names)
        # a case that names its tools offers only those (the spec's order); the others offer every tool
        every = self._domain_tools.toolset
        self._case_tools = {c["name"]: ToolSet(t for t in every if t.name in c["tools"])
                            for c in self.cap_spec.cases if "tools" in c}
        self._backend: DomainBackend | None = None
        self._policy = self._domain.system_prompt()
        self._seed: int | None = None
        self.scenario: Scenario | None = None
        self._log = EpisodeLog()
        self._user: Any = None

    # ------------------------------------------------------------------ Gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        before, self._seed = self._seed, seed
        try:
            return super().reset(seed=seed, options=options)
        except BaseException:
            self._seed = before  # a refused reset changes nothing
            raise

    # ------------------------------------------------------------------ ToolEnv hooks
    def _start(self, options: dict[str, Any]) -> EpisodeOpening:
        rng = random.Random(int(self._scenario_generator(options).integers(0, 2**63 - 1)))
        wanted = {**self._overrides(), **dict(options.get("difficulty") or {})}
        knobs = self.cap_spec.knobs(wanted) if wanted else dict(self._default_knobs)
        sizes = {k: int(resolve_number(v, knobs)) for k, v in (self.cap_spec.data.get("db") or {}).items()}
        db = self._domain.generate(rng, **sizes)
        if "case" in options:
            wanted = [c for c in self.cap_spec.cases if c["name"] == options["case"]]
            if not wanted:
                raise ValueError(f"{self.cap_spec.env_id}: unknown case {options['case']!r}; expected one of {[c['name'] for c in self.cap_spec.cases]}")
            case = wanted[0]
        else:
            case = choose_case(self.cap_spec, knobs, rng)
        # per-episode knob overrides (options["difficulty"]) may move the hint share and the step limit
        self.hint_fraction = self._hint_fraction(knobs)
        if self._fixed_max_steps is None:
            self.max_steps = max(1, int(resolve_number(self.cap_spec.data.get("max_steps", 30), knobs)))
        hint_draw = rng.random() < self.hint_fraction
        scenario = bind_scenario(self.cap_spec, case, db, knobs, rng, self._seed, other_cases="case" not in options)
        backend = self._domain.backend(db)
        if self.verify_reference:
            self._dry_run(scenario, backend.fork())
        show_hint = bool(options["hint"]) if "hint" in options else hint_draw
        show_hint = show_hint and scenario.hint is not None
        self.scenario = scenario
        self._backend = backend
        self._domain_tools.backend = backend
        self._log = EpisodeLog()
        self._user = self._make_user(scenario, knobs)
        base_prompt = self._system_prompt()
        prompt = base_prompt + (f"\n\n## Hint\n{scenario.hint}" if show_hint else "")
        opening = {"role": "user", "content": scenario.opening}
        self._log.events.append({"kind": "user", "text": scenario.opening})
        info = {
            "spec_id": self.cap_spec.id,
            "capability": self.cap_spec.data["capability"],
            "case": scenario.name,
            "hint_shown": show_hint,
            "prompt_messages_without_hint": [{"role": "system", "content": base_prompt}, dict(opening)],
            "difficulty": dict(knobs),
            "seed": self._seed,
        }
        tools = self._case_tools.get(scenario.name, self._domain_tools.toolset)
        return EpisodeOpening(system_prompt=prompt, tools=tools, messages=[opening], info=info)

    def _hint_fraction(self, knobs: dict[str, float]) -> float:
        if self._fixed_hint_fraction is not None:
            return self._fixed_hint_fraction
        hint = self.cap_spec.data.get("hint") or {}
        return min(1.0, max(0.0, resolve_number(hint.get("fraction", 0.0), knobs)))

    def _overrides(self) -> dict[str, float]:
        defaults = self._default_knobs
        return {k: v for k, v in self.knob_values.items() if defaults.get(k) != v}

    def _system_prompt(self) -> str:
        pre = self.cap_spec.data.get("preamble")
        return f"{pre}\n\n{self._policy}" if pre else self._policy

    def _make_user(self, scenario: Scenario, knobs: dict[str, float]) -> Any:
        u = scenario.user
        turns = int(resolve_number(u.get("max_turns", 8), knobs))
        if self.user_simulator is not None and "simulator" in u:
            sim = u["simulator"]
            return SimulatedUser(self.user_simulator, sim["instructions"], sim.get("stop_token", "###STOP###"), turns)
        kw: dict[str, Any] = {"rules": u.get("rules", []), "max_turns": turns}
        if u.get("fallback"):
            kw["fallback"] = list(u["fallback"])
        if hasattr(self._backend, "user_call"):  # dual control: the user operates their own device
            kw["device"] = self._user_tool_call
        return ScriptedUser(**kw)

    def _user_tool_call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """One call of the user's own tools on the episode's device (logged as a ``user_call`` event)."""
        res = self._backend.user_call(name, arguments)
        self._log.events.append({"kind": "user_call", "name": name, "args": copy_db(arguments), "error": res.error})
        return res

    def _dry_run(self, scenario: Scenario, backend: DomainBackend) -> None:
        for step in scenario.reference:
            if "call" not in step:
                continue
            args = step.get("args", {})
            problem = self._domain_tools.validate(step["call"], args)
            res = backend.call(step["call"], args) if problem is None else None
            if res is None or res.error:
                raise UnsolvableScenarioError(
                    f"{self.cap_spec.env_id} (spec {self.cap_spec.source}): seed {self._seed}: case {scenario.name!r}: "
                    f"reference call {step['call']} failed: {problem or res.content}; the task would have no reference solution"
                )

    def _call_tool(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        if name in self.tools and isinstance(arguments, dict) and self._backend is not None:
            res = self._backend.call(name, arguments)
        else:  # unknown tool or non-object arguments: the core's clean error, nothing runs
            res = self.tools.call(name, arguments)
        args = arguments if isinstance(arguments, dict) else {}
        self._log.events.append({"kind": "call", "name": name, "args": copy_db(args), "error": res.error})
        if name == "transfer_to_human_agents" and not res.error:
            self.end("transfer")
        return res

    def _respond(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        text = message.get("content") or ""
        self._log.events.append({"kind": "agent", "text": text})
        turn = self._user.respond(self.transcript())
        reply = turn.content or ""
        self._log.events.append({"kind": "user", "text": reply})
        if turn.end:
            self.end("user_stop")
        return [{"role": "user", "content": reply}]

    def _evaluate(self) -> tuple[float, dict[str, Any]]:
        assert self.scenario is not None
        self._log.initial_db = self._backend.initial_db()
        self._log.final_db = self._backend.state_view()  # read only: the checks never change it
        reward, info = evaluate_rewards(self.scenario.rewards, self._log)
        info["case"] = self.scenario.name
        return reward, info

    def state_fingerprint(self) -> Any:
        """A hash of the episode's database (equal iff the world state is the same)."""
        return self._backend.fingerprint() if self._backend is not None else None

    def reference_tables(self) -> dict[str, list[tuple[str, str]]]:
        """The spec's cases with their reward checks, and its difficulty knobs (at this env's knob values)."""
        def num(value: Any) -> str:
            return f"{resolve_number(value, self.knob_values):g}"

        cases = []
        for c in self.cap_spec.cases:
            checks = [f"`{r['name']}` ({r['type']}, " + ("gate" if r.get("gate") else f"×{num(r.get('weight', 1))}") + ")"
                      for r in c.get("rewards", [])]
            what = "must not be carried out" if c.get("allowed") is False else "is to be carried out"
            cases.append((f"`{c['name']}`", f"drawn with weight {num(c.get('weight', 1.0))}; the request {what}; "
                          f"checks: {', '.join(checks)}"))
        knobs = []
        for name, k in (self.cap_spec.data.get("difficulty") or {}).items():
            harder = {"up": "higher is harder", "down": "lower is harder"}.get(k.get("harder", ""), "")
            notes = [k.get("description", ""), harder, "never tuned" if k.get("tune") is False else ""]
            knobs.append((f"`{name}`", f"default {k['default']:g}, {k['min']:g} to {k['max']:g} "
                          f"({k.get('type', 'float')}); " + "; ".join(n for n in notes if n)))
        return {"Cases and their reward checks": cases, "Difficulty knobs (`difficulty={...}`)": knobs}

    # ------------------------------------------------------------------ for tests, calibration and probes
    def case_names(self) -> list[str]:
        """The names of the cases an episode can draw at the env's knobs (weight above 0), in spec order;
        ``reset(options={"case": name})`` plays that case."""
        drawable = [c["name"] for c in self.cap_spec.cases
                    if resolve_number(c.get("weight", 1.0), self.knob_values) > 0]
        return drawable or [c["name"] for c in self.cap_spec.cases]  # every weight 0: any case is drawn

    def reference_actions(self, style: str = "hermes") -> list[str]:
        """The current episode's reference solution as text actions (never shown to the agent)."""
        if self.scenario is None:
            raise RuntimeError("call reset() first")
        return [format_tool_call(s["call"], s.get("args", {}), style) if "call" in s else s["say"] for s in self.scenario.reference]

    def unauthorized_actions(self, style: str = "hermes") -> list[str]:
        """Writes the policy forbids in the current episode (probe actions for ``check_reward``)."""
        if self.scenario is None:
            raise RuntimeError("call reset() first")
        return [format_tool_call(s["call"], s.get("args", {}), style) for s in self.scenario.unauthorized]

    def read_only_actions(self, style: str = "hermes") -> list[str]:
        """The reference's read-only calls as text actions (inserted anywhere, they must not change the reward)."""
        if self.scenario is None:
            raise RuntimeError("call reset() first")
        kinds = self._domain_tools.kinds
        return [format_tool_call(s["call"], s.get("args", {}), style) for s in self.scenario.reference
                if "call" in s and kinds.get(s["call"]) == "read"]

    @property
    def task_allowed(self) -> bool:
        """Whether the current case's request should be carried out."""
        return self.scenario.allowed if self.scenario is not None else True

    @property
    def reference_write_index(self) -> int | None:
        """Index in :meth:`reference_actions` of the first write call, if any."""
        if self.scenario is None:
            return None
        kinds = self._domain_tools.kinds
        for i, s in enumerate(self.scenario.reference):
            if "call" in s and kinds.get(s["call"]) == "write":
                return i
        return None

    # ------------------------------------------------------------------ tasks
    def _scenario_generator(self, options: dict[str, Any]) -> Any:
        """What the scenario is drawn from: the reset seed's generator, or that of ``options["scenario_seed"]``."""
        if options.get("scenario_seed") is None:
            return self.np_random
        from gymnasium.utils import seeding

        from .tasks import scenario_seed

        return seeding.np_random(scenario_seed(options["scenario_seed"]))[0]

    @property
    def task_source(self):
        """Scenario seeds as tasks, the reference solution as gold, cases as groups (:mod:`.tasks`)."""
        from .tasks import CapabilityTasks

        writes = frozenset(n for n, k in self._domain_tools.kinds.items() if k == "write")
        spec, knobs, verify = self.cap_spec, dict(self.knob_values), self.verify_reference
        return CapabilityTasks(spec.env_id, spec.domain, writes,
                               lambda: CapabilityEnv(spec, difficulty=knobs, verify_reference=verify))
