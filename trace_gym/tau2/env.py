"""τ²-bench domains as Gymnasium environments (``trace/tau2-{airline,retail,telecom,mock}-v0``).

One episode is one τ²-bench task, run the way tau2 1.0.1's orchestrator runs it:

* ``reset(seed, options={"task_id": ..., "split": "base"|"train"|"test"})`` picks the task
  (seeded by ``self.np_random`` when no id is given; ``options["task"]`` may pass a
  task dict directly), applies its initial state, and opens the conversation: the fixed
  greeting ``Hi! How can I help you today?`` and the user's first message — or, when the
  task has a message history, that history (continued by whoever's turn it is).  In
  **solo mode** there is no user: the agent works from the task's ticket and ends with
  the ``done`` tool.
* Each action is one agent message: text for the user, or one or more tool calls
  (any syntax :func:`~trace_gym.core.toolcalls.parse_action` accepts).  Tool calls are
  answered with their results; a text message is answered by the user simulator
  (:mod:`trace_gym.tau2.users`), whose own device-tool calls (telecom) are executed with
  requestor ``user`` and stay invisible to the agent, as in tau2.
* The episode **terminates** on agent stop (a text containing ``###STOP###``, or ``done``
  in solo mode — the whole action then becomes the stop message), on user stop
  (``###STOP###``, ``###TRANSFER###``, ``###OUT-OF-SCOPE###``), on a text message in
  solo mode (tau2's ``agent_error``) and on ``too_many_errors`` (``max_errors`` tool
  errors, 10 by default).  It is **truncated** at ``max_steps`` orchestrator steps (100
  by default), counted as tau2 counts them: each agent message, each user message and
  each batch of tool results is one step, the greeting is none, and the limits are not
  checked while a tool call awaits its result.  A malformed action also counts one step
  (it changes nothing else), so every episode ends.
* The reward is given once, at the end, with tau2's full breakdown in
  ``info["reward_info"]`` (:func:`trace_gym.tau2.evaluator.evaluate`); terminations other
  than agent/user stop score 0.  Nothing in ``info`` before the end reveals gold actions
  or assertions.  NL assertions need a ``judge``; without one they are reported as not
  judged and the reward counts as 0 (``unjudged_nl="zero"``) or ignores them
  (``unjudged_nl="ignore"``, i.e. tau2's ``reward_without_nl``).  ``strict=True`` uses the
  strict score (see :mod:`trace_gym.tau2.evaluator`).

``info["messages"]`` is the agent's view in OpenAI chat format; :meth:`Tau2Env.tau2_trajectory`
returns the full conversation in τ² form (what is scored).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trace_gym.core.env import FEEDBACK_NAME, EpisodeOpening, ToolEnv
from trace_gym.core.spaces import DEFAULT_MAX_LENGTH
from trace_gym.core.toolcalls import ParsedAction
from trace_gym.core.tools import Tool, ToolError, ToolResult, ToolSet

from .domain_spec import DomainData, load_domain
from .engine import Tau2Environment
from .env_doc import REWARD_INFO_KEYS, TERMINATION_REASONS
from .evaluator import evaluate  # at import, not in the first episode's last step
from .prompts import agent_system_prompt
from .users import STOP, UserContext, UserSimulator, is_user_stop, make_user

__all__ = ["Tau2Env", "GREETING", "DONE_TOOL", "agent_system_prompt", "to_tau2_messages"]

GREETING = "Hi! How can I help you today?"
DONE_TOOL = {
    "type": "function",
    "function": {
        "name": "done",
        "description": "Call this function when you are done with the task.",
        "parameters": {"properties": {}, "title": "parameters", "type": "object"},
    },
}


def to_tau2_messages(messages: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI chat dicts -> τ² form (system and feedback messages dropped; results matched by id)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        role = m.get("role")
        if role == "system" or m.get("name") == FEEDBACK_NAME:
            continue
        if role == "tool":
            out.append({"role": "tool", "id": m.get("tool_call_id"), "content": m.get("content"),
                        "requestor": "assistant", "error": str(m.get("content") or "").startswith("Error:")})
            continue
        calls = None
        if m.get("tool_calls"):
            calls = []
            for tc in m["tool_calls"]:
                fn = tc.get("function") or {}
                raw = fn.get("arguments") or "{}"
                args = json.loads(raw) if isinstance(raw, str) else raw
                calls.append({"id": tc.get("id"), "name": fn.get("name"), "arguments": args, "requestor": role})
        out.append({"role": role, "content": None if calls else m.get("content"), "tool_calls": calls})
    return out


_SCHEMA_CACHE: dict[tuple[str, str, bool], list[dict[str, Any]]] = {}


class Tau2Env(ToolEnv):
    """A τ²-bench domain as a text-in, text-out Gymnasium env: one task per episode, run as tau2 1.0.1 runs it.

    Args:
        domain: the τ²-bench domain: ``airline``, ``retail``, ``telecom`` or ``mock``.
        split: the split a task is drawn from when ``reset`` names none (``base``, ``train``, ``test``).
        task_id: play this task at every reset that names none.
        solo_mode: no user: the agent works from the task's ticket and ends with the ``done`` tool (domains
            with tickets only).
        user: the user simulator: ``"offline"`` (deterministic, no model), ``"llm"`` (an OpenAI-compatible
            endpoint), ``{"kind": "offline"|"llm"|"replay", ...}`` or a ``UserSimulator``.
        judge: the judge of natural-language assertions: None, a ``Judge``, or the keyword arguments of an
            OpenAI-compatible one.
        strict: score in strict mode (gold reads and NL assertions required, so refusing alone cannot pass).
        unjudged_nl: without a judge, a task with NL assertions scores 0 (``"zero"``) or tau2's reward
            without them (``"ignore"``).
        max_steps: the step limit, in tau2's orchestrator steps (each agent message, user message and batch
            of tool results is one).
        max_errors: the episode ends after this many tool errors.
        data_dir: another copy of the τ²-bench data (default: the data variable, the cache, the packaged copy).
    """

    reset_option_keys = frozenset({"task", "task_id", "split"})
    termination_reasons = TERMINATION_REASONS
    reward_info_keys = REWARD_INFO_KEYS

    def __init__(
        self,
        domain: str = "mock",
        *,
        split: str = "base",
        task_id: str | None = None,
        solo_mode: bool = False,
        user: Any = "offline",
        judge: Any = None,
        strict: bool = False,
        unjudged_nl: str = "zero",
        max_steps: int = 100,
        max_errors: int = 10,
        data_dir: str | Path | None = None,
        render_mode: str | None = None,
        max_action_length: int = DEFAULT_MAX_LENGTH,
        max_observation_length: int = DEFAULT_MAX_LENGTH,
        tools_in_observation: bool = True,
    ):
        super().__init__(max_steps=max_steps, render_mode=render_mode, max_action_length=max_action_length,
                         max_observation_length=max_observation_length, tools_in_observation=tools_in_observation)
        if max_errors < 1:
            raise ValueError(f"max_errors must be >= 1, got {max_errors}")
        if unjudged_nl not in ("zero", "ignore"):
            raise ValueError(f"unjudged_nl must be 'zero' or 'ignore', got {unjudged_nl!r}")
        self.domain = domain
        self.split = split
        self.default_task_id = task_id
        self.solo_mode = solo_mode
        self.judge = _make_judge(judge)
        self.strict = strict
        self.unjudged_nl = unjudged_nl
        self.max_errors = max_errors
        self.data_dir = data_dir
        self._user_spec = user
        self._user: UserSimulator | None = None
        self._data: DomainData | None = None
        self._env: Tau2Environment | None = None
        self._task: dict[str, Any] | None = None
        self._traj: list[dict[str, Any]] = []
        self._tau2_steps = 0
        self._num_errors = 0
        self._user_calls = 0
        self._toolset: ToolSet | None = None
        self._schemas: list[dict[str, Any]] | None = None
        self._last_eval: Any = None
        self._user_failure: str | None = None
        self._split_cache: dict[str, list[dict[str, Any]]] = {}
        self._id_index: dict[str, dict[str, Any]] | None = None
        self._policy_text: str | None = None

    # ------------------------------------------------------------------ data
    @property
    def data(self) -> DomainData:
        if self._data is None:
            self._data = load_domain(self.domain, self.data_dir)
            if self.solo_mode and self._data.spec.solo_error is not None:
                raise ValueError(self._data.spec.solo_error)
        return self._data

    def tasks(self, split: str | None = None) -> list[dict[str, Any]]:
        """The tasks of ``split`` (default: the env's split), in tasks.json order (cached; do not mutate)."""
        from .data import load_tasks

        key = split or self.split
        tasks = self._split_cache.get(key)
        if tasks is None:
            tasks = load_tasks(self.domain, self.data_dir, split=key)
            if self.solo_mode:
                tasks = [t for t in tasks if t.get("ticket")]
            self._split_cache[key] = tasks
        return tasks

    def _task_by_id(self, task_id: str) -> dict[str, Any] | None:
        if self._id_index is None:
            from .data import load_tasks

            self._id_index = {t["id"]: t for t in load_tasks(self.domain, self.data_dir)}
        return self._id_index.get(task_id)

    def _policy(self) -> str:
        if self._policy_text is None:
            from .data import load_policy

            self._policy_text = load_policy(self.domain, solo_mode=self.solo_mode, data_dir=self.data_dir)
        return self._policy_text

    def _agent_schemas(self) -> list[dict[str, Any]]:
        if self._schemas is None:
            key = (self.domain, str(self.data.directory), self.solo_mode)
            schemas = _SCHEMA_CACHE.get(key)
            if schemas is None:
                schemas = list(self.data.tools and [t["openai_schema"] for t in self.data.tools])
                if self.solo_mode:
                    schemas += [t["openai_schema"] for t in self.data.user_tools] + [DONE_TOOL]
                _SCHEMA_CACHE[key] = schemas
            self._schemas = schemas
        return self._schemas

    def _build_toolset(self) -> ToolSet:
        """A :class:`ToolSet` over the live episode (schemas exactly as tau2 sends them)."""
        if self._toolset is None:
            ts = ToolSet()
            for schema in self._agent_schemas():
                fn = schema["function"]
                name = fn["name"]
                ts.add(Tool(name=name, description=fn.get("description", ""), parameters=fn.get("parameters") or {"type": "object"},
                            fn=self._toolset_caller(name), kind=self.data.tool_kind(name) or "generic",  # type: ignore[arg-type]
                            validate=_no_validation, render=_as_is, _schema=schema))
            self._toolset = ts
        return self._toolset

    def _toolset_caller(self, name: str):
        def call(**arguments: Any) -> str:
            res = self._execute(name, arguments, "assistant")
            if res.error:
                raise _ToolFailure(res.content[len("Error: "):] if res.content.startswith("Error: ") else res.content)
            return res.content
        return call

    # ------------------------------------------------------------------ ToolEnv hooks
    def _start(self, options: dict[str, Any]) -> EpisodeOpening:
        task = self._choose_task(options)  # first: a refused option changes nothing
        self._user_failure = None
        self._task = task
        data = self.data
        self._env = Tau2Environment(data, solo_mode=self.solo_mode)
        self._traj = []
        self._tau2_steps = 0
        self._num_errors = 0
        self._user_calls = 0
        self._last_eval = None
        policy = self._policy()
        if self.solo_mode:
            system = agent_system_prompt(policy, solo_ticket=str(task.get("ticket") or ""))
        else:
            system = agent_system_prompt(policy)
        ist = task.get("initial_state") or {}
        history = [dict(m) for m in (ist.get("message_history") or [])]
        pending_calls: list[dict[str, Any]] = []
        if history and history[-1].get("role") in ("assistant", "user") and history[-1].get("tool_calls"):
            pending_calls = list(history[-1]["tool_calls"])  # a call that awaits its result: run it below
            self._env.set_state(ist.get("initialization_data"), ist.get("initialization_actions"), history[:-1])
        else:
            self._env.set_state(ist.get("initialization_data"), ist.get("initialization_actions"), history)
        self._user = None if self.solo_mode else make_user(self._user_spec, data_dir=self.data_dir)
        opening: list[dict[str, Any]] = []
        if history:
            for m in history:
                self._traj.append(_tau2_copy(m))
                opening.extend(_agent_view(m))
        if self._user is not None:
            user_tools = [t["openai_schema"] for t in data.user_tools]
            visible = [m for m in self._traj if _user_visible(m)]
            self._user.reset(UserContext(task=task, domain=self.domain, tools=user_tools, history=visible,
                                         rng=self.np_random, data_dir=self.data_dir))
        # Continue the history as tau2's orchestrator would, up to the agent's turn.
        if pending_calls:
            last = history[-1]
            requestor = "user" if last.get("role") == "user" else "assistant"
            results = self._run_calls(pending_calls, requestor)
            if requestor == "assistant":
                opening.extend(self._tool_view(results))
            self._check_limits()
            if requestor == "user" and self._termination_reason is None:
                opening.extend(self._user_turn(results))
        elif not history:
            if not self.solo_mode:
                greeting = {"role": "assistant", "content": GREETING, "tool_calls": None}
                self._traj.append(greeting)
                opening.append({"role": "assistant", "content": GREETING})
                opening.extend(self._user_turn([greeting]))
        else:
            last = history[-1]
            if last.get("role") == "assistant" and not self.solo_mode:
                if "###STOP###" in str(last.get("content") or ""):
                    self.end("agent_stop")
                else:
                    opening.extend(self._user_turn([self._traj[-1]]))
            elif last.get("role") == "user" and is_user_stop(last):
                self.end("user_stop")
            elif last.get("role") == "tool" and last.get("requestor") == "user" and self._user is not None:
                opening.extend(self._user_turn([self._traj[-1]]))
        info = {"domain": self.domain, "task_id": task.get("id"), "split": self.split, "solo_mode": self.solo_mode,
                "user": type(self._user).__name__ if self._user is not None else None}
        return EpisodeOpening(system_prompt=system, tools=self._build_toolset(), messages=opening, info=info)

    def _choose_task(self, options: dict[str, Any]) -> dict[str, Any]:
        if isinstance(options.get("task"), Mapping):
            from .data import check_task

            check_task(options["task"], "options['task']")
            return dict(options["task"])
        split = options.get("split", self.split)
        task_id = options.get("task_id", self.default_task_id)
        if task_id is not None:
            t = self._task_by_id(str(task_id))
            if t is None:
                raise ValueError(f"unknown {self.domain} task id {task_id!r}")
            if self.solo_mode and not t.get("ticket"):
                raise ValueError(f"task {task_id!r} has no ticket, so it cannot run in solo mode")
            return t
        tasks = self.tasks(split)
        if not tasks:
            raise ValueError(f"split {split!r} of {self.domain} has no tasks" + (" with a ticket" if self.solo_mode else ""))
        return tasks[int(self.np_random.integers(len(tasks)))]

    def _evaluate(self) -> tuple[float, dict[str, Any]]:
        assert self._task is not None and self._env is not None
        reason = self._termination_reason or "max_steps"
        ev = evaluate(self._task, self._traj, reason, self.data, solo_mode=self.solo_mode, judge=self.judge,
                      strict=self.strict, predicted=self._env)
        self._last_eval = ev
        info = dict(ev.reward_info) if ev.reward_info is not None else {
            "reward": None, "db_check": None, "env_assertions": None, "action_checks": None, "nl_assertions": None,
            "communicate_checks": None, "reward_basis": None, "reward_breakdown": None, "info": None,
        }
        info["termination_reason"] = reason
        info["reward_without_nl"] = ev.reward_without_nl
        info["nl_assertions_judged"] = ev.nl_assertions_judged
        info["evaluation_error"] = ev.evaluation_error
        if self.strict:
            reward = ev.gym_reward(strict=True)
        elif ev.reward is None and ev.evaluation_error is None and ev.nl_assertions_judged is False:
            reward = float(ev.reward_without_nl or 0.0) if self.unjudged_nl == "ignore" else 0.0
            info["nl_note"] = f"{ev.nl_note}; reward counted as {reward} (unjudged_nl={self.unjudged_nl!r})"
        else:
            reward = ev.gym_reward()
        return reward, info

    def state_fingerprint(self) -> Any:
        """The canonical hashes of both databases (equal iff the state is the same)."""
        if self._env is None:
            return None
        h = self._env.hashes()
        return (h["db_canonical_sha256"], h["user_db_canonical_sha256"])

    def tau2_trajectory(self) -> list[dict[str, Any]]:
        """The whole conversation in τ² form (including user tool calls) — what the evaluator scores."""
        return [json.loads(json.dumps(m)) for m in self._traj]

    @property
    def task(self) -> dict[str, Any] | None:
        return self._task

    @property
    def tau2_env(self) -> Tau2Environment | None:
        """The live tool environment of the current episode."""
        return self._env

    # ------------------------------------------------------------------ orchestration
    def _execute(self, name: str, arguments: dict[str, Any], requestor: str) -> ToolResult:
        assert self._env is not None
        return self._env.get_response(name, arguments, requestor)

    def _run_calls(self, calls: list[dict[str, Any]], requestor: str,
                   answers: list[ToolResult] | None = None) -> list[dict[str, Any]]:
        """Execute one message's calls (one tau2 step); returns the τ² tool messages (and appends
        each call's :class:`ToolResult` to ``answers`` when given)."""
        assert self._env is not None
        get_response, traj = self._env.get_response, self._traj
        results = []
        for tc in calls:
            res = get_response(tc["name"], tc.get("arguments") or {}, requestor)
            if res.error:
                self._num_errors += 1
            tm = {"role": "tool", "id": tc.get("id"), "content": res.content, "requestor": requestor, "error": res.error}
            results.append(tm)
            traj.append(tm)
            if answers is not None:
                answers.append(res)
        self._tau2_steps += 1
        return results

    def _tool_view(self, results: list[dict[str, Any]]) -> list[dict[str, Any]]:
        names = {}
        for m in reversed(self._traj):
            if m.get("tool_calls"):
                for tc in m["tool_calls"]:
                    names[tc.get("id")] = tc.get("name")
                break
        return [{"role": "tool", "tool_call_id": r["id"], "name": names.get(r["id"]), "content": r["content"]} for r in results]

    def _check_limits(self) -> None:
        """tau2's termination check (run after every step that is not waiting for a tool result)."""
        if self._tau2_steps >= self.max_steps:
            self.end("max_steps", replace=True)
        if self._num_errors >= self.max_errors:
            self.end("too_many_errors", replace=True)

    def _user_turn(self, incoming: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Let the user act until it sends a text to the agent or the episode ends; returns the agent-visible part."""
        assert self._user is not None
        visible: list[dict[str, Any]] = []
        for _ in range(1000):  # a user that only ever calls tools still hits max_steps
            try:
                msg = self._user.respond([m for m in incoming if _user_visible(m)])
            except Exception as exc:  # a failing user simulator is tau2's user_error
                self._tau2_steps += 1
                self.end("user_error", replace=True)
                self._user_failure = f"{type(exc).__name__}: {exc}"
                return visible
            msg = _normalise_user_message(msg)
            if msg.get("tool_calls"):
                for tc in msg["tool_calls"]:
                    if not tc.get("id"):
                        tc["id"] = f"ucall_{self._user_calls}"
                    tc["requestor"] = "user"
                    self._user_calls += 1
            self._traj.append(msg)
            self._tau2_steps += 1
            if is_user_stop(msg):
                self.end("user_stop")
            if msg.get("tool_calls"):
                incoming = self._run_calls(msg["tool_calls"], "user")
                self._check_limits()
                if self._termination_reason is not None:
                    return visible
                continue
            visible.append({"role": "user", "content": msg.get("content") or ""})
            self._check_limits()
            return visible
        self.end("max_steps", replace=True)
        return visible

    # ------------------------------------------------------------------ ToolEnv action hooks
    def _reject(self, action: Any, error: str, extra: dict[str, Any]) -> None:
        super()._reject(action, error, extra)
        self._tau2_steps += 1  # a malformed action is an agent step too, so every episode ends
        self._check_limits()

    def _act_calls(self, parsed: ParsedAction, extra: dict[str, Any]) -> None:
        self._tau2_steps += 1  # the agent's message
        if self.solo_mode and any(n == "done" for n, _ in parsed.calls):
            # tau2's gym agent turns a `done` call into the stop message (other calls are dropped).
            self._traj.append({"role": "assistant", "content": STOP, "tool_calls": None})
            self.messages.append({"role": "assistant", "content": STOP})
            self.end("agent_stop")
            if len(parsed.calls) > 1:
                extra["note"] = "`done` ends the episode: the other calls in this action were not executed"
        else:
            tool_calls = self._record_calls(parsed)
            t_calls = [{"id": tc["id"], "name": name, "arguments": arguments, "requestor": "assistant"}
                       for tc, (name, arguments) in zip(tool_calls, parsed.calls, strict=True)]
            self._traj.append({"role": "assistant", "content": None, "tool_calls": t_calls})
            answers: list[ToolResult] = []
            self._run_calls(t_calls, "assistant", answers)
            for tc, res in zip(tool_calls, answers, strict=True):
                self._record_result(tc, res, extra)
        self._check_limits()

    def _act_message(self, parsed: ParsedAction, extra: dict[str, Any]) -> None:
        text = parsed.content or ""
        msg = {"role": "assistant", "content": text, "tool_calls": None}
        self._traj.append(msg)
        self.messages.append({"role": "assistant", "content": text})
        self._tau2_steps += 1
        if STOP in text:
            self.end("agent_stop")
        elif self.solo_mode:
            self.end("agent_error")
            extra["note"] = "solo mode: the agent may only call tools (or `done`); a text message ends the episode"
        self._check_limits()
        if self._termination_reason is None:
            self.messages.extend(self._user_turn([msg]))

    def _info_fields(self) -> dict[str, Any]:
        return {"tau2_steps": self._tau2_steps, "num_errors": self._num_errors}

    def _final_info(self) -> dict[str, Any]:
        return {"user_error": self._user_failure} if self._user_failure else {}

    @property
    def task_source(self):
        """This domain's tasks, splits, gold references and groups (:mod:`trace_gym.tau2.tasks`)."""
        from .tasks import Tau2Tasks

        return Tau2Tasks(self.domain, data_dir=self.data_dir, solo_mode=self.solo_mode)


def _make_judge(spec: Any) -> Any:
    """A judge from a spec: ``None``, a :class:`~trace_gym.tau2.judge.Judge`, or OpenAICompatibleJudge kwargs."""
    if spec is None or hasattr(spec, "judge"):
        return spec
    if isinstance(spec, Mapping):
        from .judge import OpenAICompatibleJudge

        return OpenAICompatibleJudge(**spec)
    raise ValueError(f"judge must be None, a Judge or a dict of OpenAICompatibleJudge arguments, got {spec!r}")


class _ToolFailure(ToolError):
    """A tool error surfaced through :meth:`ToolSet.call` (the text already starts with ``Error: ``)."""


def _no_validation(arguments: dict[str, Any]) -> str | None:
    return None  # the engine validates, with tau2's exact error texts


def _as_is(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _tau2_copy(m: Mapping[str, Any]) -> dict[str, Any]:
    out = {"role": m.get("role"), "content": m.get("content")}
    if m.get("role") == "tool":
        out.update(id=m.get("id"), requestor=m.get("requestor", "assistant"), error=bool(m.get("error", False)))
    else:
        calls = m.get("tool_calls")
        out["tool_calls"] = None if calls is None else [
            {"id": tc.get("id"), "name": tc.get("name"), "arguments": dict(tc.get("arguments") or {}),
             "requestor": tc.get("requestor", m.get("role"))} for tc in calls
        ]
    return out


def _agent_view(m: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The OpenAI-format message the agent sees for a τ² message (user tool traffic is hidden)."""
    role = m.get("role")
    if role == "assistant":
        if m.get("tool_calls"):
            return [{"role": "assistant", "content": None, "tool_calls": [
                {"id": tc.get("id"), "type": "function",
                 "function": {"name": tc.get("name"), "arguments": json.dumps(tc.get("arguments") or {})}}
                for tc in m["tool_calls"]]}]
        return [{"role": "assistant", "content": m.get("content")}]
    if role == "user":
        return [] if m.get("tool_calls") else [{"role": "user", "content": m.get("content") or ""}]
    if role == "tool" and m.get("requestor", "assistant") == "assistant":
        return [{"role": "tool", "tool_call_id": m.get("id"), "content": m.get("content")}]
    return []


def _user_visible(m: Mapping[str, Any]) -> bool:
    role = m.get("role")
    return (role == "user" or (role == "assistant" and m.get("tool_calls") is None)
            or (role == "tool" and m.get("requestor") == "user"))


def _normalise_user_message(msg: Any) -> dict[str, Any]:
    if not isinstance(msg, Mapping):
        return {"role": "user", "content": str(msg), "tool_calls": None}
    calls = msg.get("tool_calls")
    if calls:
        norm = []
        for tc in calls:
            args = tc.get("arguments") if isinstance(tc, Mapping) else None
            norm.append({"id": tc.get("id") if isinstance(tc, Mapping) else None,
                         "name": str(tc.get("name")) if isinstance(tc, Mapping) else str(tc),
                         "arguments": dict(args) if isinstance(args, Mapping) else {}})
        return {"role": "user", "content": None, "tool_calls": norm}
    content = msg.get("content")
    return {"role": "user", "content": content if isinstance(content, str) else ("" if content is None else str(content)),
            "tool_calls": None}
