"""τ²-bench evaluation with tau2 1.0.1 semantics (``evaluate_simulation``, ``EvaluationType.ALL``).

Input is a conversation in **τ² form** — the shape of the conformance corpus::

    {"role": "assistant"|"user", "content": str|None,
     "tool_calls": None | [{"id", "name", "arguments": {...}, "requestor"}]}
    {"role": "tool", "id", "content", "requestor", "error"}

(:func:`trace_gym.tau2.env.to_tau2_messages` converts the gym's OpenAI-format
messages).  The result reproduces tau2's ``RewardInfo.model_dump(mode="json")``:

1. A termination other than ``agent_stop``/``user_stop`` scores 0.0 and nothing is
   checked (``reward_basis: null``, ``info.note`` says why).
2. **DB** — the predicted environment (the task's initial state, then the trajectory's
   state-changing calls replayed; or the live environment of a gym episode) is compared
   with the gold environment (initial state + every gold action, failures ignored, no
   sync).  Both the agent and the user database must match.  The gold environment is
   built once per task and cached.
3. **ENV_ASSERTION** — each assertion function runs on the predicted environment and
   must return its ``assert_value``.  An exception raised by an assertion function
   makes the whole evaluation fail, as in tau2 (:class:`Evaluation.evaluation_error`).
4. **ACTION** — every gold action must equal (name + compared arguments) some tool call
   of the assistant *or* the user; ``compare_args: null`` compares only the keys the
   call itself has.
5. **COMMUNICATE** — every ``communicate_info`` string must be a case-insensitive
   substring of an assistant text, with commas removed from the text.
6. **NL_ASSERTION** — judged by a :class:`~trace_gym.tau2.judge.Judge`.  Without a judge
   (or when the judge fails) the component is *not judged*: ``nl_assertions`` and
   ``reward_breakdown.NL_ASSERTION`` are ``None`` and ``reward`` is ``None`` unless
   another component is already 0 — never silently 1.
7. The reward is the product of the components in ``reward_basis``; every component is
   still computed and reported.

**Strict mode** (opt-in, ``strict=True``) adds a second score, ``strict_reward``, for
training signals that should not reward doing nothing: the basis is extended with
ACTION whenever the task has gold actions (so the gold *reads* must happen too) and
with NL_ASSERTION whenever the task has NL assertions, and an NL component that was not
judged counts as 0.  Under strict mode a trajectory that only refuses cannot pass any
airline task offline (tau2 itself gives 1.0 to 23 of the 50).  tau2's own ``reward`` is
unchanged and always reported.

τ-bench's pass^k over trial outcomes is :func:`trace_gym.eval.metrics.pass_hat_k`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.outcome import is_success  # re-exported: the library-wide definition (reward 1 within 1e-6)
from .engine import DomainData, Tau2Environment, load_domain
from .judge import Judge, JudgeError

__all__ = [
    "Evaluation",
    "REWARDED_TERMINATIONS",
    "evaluate",
    "gold_environment",
    "predicted_environment",
    "is_success",
    "action_checks",
    "communicate_checks",
]

REWARDED_TERMINATIONS = ("agent_stop", "user_stop")
_ENV_BASES = ("DB", "ENV_ASSERTION")
_DEFAULT_BASIS = ["DB", "COMMUNICATE"]
_MISSING = object()


@dataclass
class Evaluation:
    """The outcome of scoring one trajectory.

    ``reward`` / ``reward_info`` are tau2's; ``reward_info`` is ``None`` only when the
    evaluation raised (then ``evaluation_error`` is ``{"type", "message"}``).
    ``reward_without_nl`` is the product of the non-NL basis components.
    """

    reward: float | None
    reward_info: dict[str, Any] | None
    reward_without_nl: float | None
    nl_assertions_judged: bool | None
    evaluation_error: dict[str, str] | None = None
    strict_reward: float | None = None
    nl_note: str | None = None
    predicted_env: Tau2Environment | None = field(default=None, repr=False)
    gold_env: Tau2Environment | None = field(default=None, repr=False)

    def gym_reward(self, *, strict: bool = False) -> float:
        """A float for the gym: the strict or tau2 reward; ``None`` (not judged / error) counts as 0."""
        value = self.strict_reward if strict else self.reward
        return float(value) if value is not None else 0.0


# --------------------------------------------------------------------------- task helpers


def _criteria(task: Mapping[str, Any]) -> dict[str, Any] | None:
    ec = task.get("evaluation_criteria")
    return ec if isinstance(ec, dict) else None


def _basis(ec: Mapping[str, Any]) -> list[str]:
    basis = ec.get("reward_basis")
    return list(basis) if basis is not None else list(_DEFAULT_BASIS)


def _initial_state(task: Mapping[str, Any]) -> tuple[Any, Any, list[dict[str, Any]]]:
    ist = task.get("initial_state") or {}
    return ist.get("initialization_data"), ist.get("initialization_actions"), list(ist.get("message_history") or [])


def _action_dump(a: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "action_id": a.get("action_id"),
        "requestor": a.get("requestor") or "assistant",
        "name": a["name"],
        "arguments": a.get("arguments") or {},
        "info": a.get("info"),
        "compare_args": a.get("compare_args"),
    }


def _assertion_dump(a: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "env_type": a["env_type"],
        "func_name": a["func_name"],
        "arguments": a.get("arguments") or {},
        "assert_value": a.get("assert_value", True),
        "message": a.get("message"),
    }


def _data(domain: str | DomainData, data_dir: str | Path | None) -> DomainData:
    return domain if isinstance(domain, DomainData) else load_domain(domain, data_dir)


# --------------------------------------------------------------------------- environments

_GOLD_CACHE: dict[tuple[Any, ...], Tau2Environment] = {}
_GOLD_CACHE_MAX = 4096


def _gold_key(data: DomainData, task: Mapping[str, Any]) -> tuple[Any, ...]:
    ec = _criteria(task) or {}
    payload = json.dumps([task.get("initial_state"), ec.get("actions")], sort_keys=True, default=str)
    return (data.name, str(data.directory), task.get("id"), payload)


def gold_environment(task: Mapping[str, Any], domain: str | DomainData, data_dir: str | Path | None = None) -> Tau2Environment:
    """The task's gold environment (cached; treat it as read-only).

    A fresh non-solo environment with the task's initial state, then every gold action
    with ``make_tool_call`` (no sync; failures ignored), as tau2 builds it.
    """
    data = _data(domain, data_dir)
    key = _gold_key(data, task)
    env = _GOLD_CACHE.get(key)
    if env is not None:
        return env
    env = Tau2Environment(data)
    init_data, init_actions, history = _initial_state(task)
    env.set_state(init_data, init_actions, history)
    for a in (_criteria(task) or {}).get("actions") or []:
        try:
            env.make_tool_call(a["name"], dict(a.get("arguments") or {}), a.get("requestor") or "assistant")
        except Exception:  # noqa: BLE001 - tau2 ignores failing gold actions
            pass
    if len(_GOLD_CACHE) >= _GOLD_CACHE_MAX:
        _GOLD_CACHE.clear()
    _GOLD_CACHE[key] = env
    return env


def predicted_environment(
    task: Mapping[str, Any],
    messages: Sequence[Mapping[str, Any]],
    domain: str | DomainData,
    *,
    solo_mode: bool = False,
    data_dir: str | Path | None = None,
    strict_replay: bool = True,
) -> Tau2Environment:
    """A fresh environment with the task's initial state and the trajectory's writes replayed.

    ``messages`` is the full trajectory (including the task's message history).  Raises
    like tau2 when the trajectory is inconsistent or a replayed output differs.
    """
    data = _data(domain, data_dir)
    env = Tau2Environment(data, solo_mode=solo_mode)
    init_data, init_actions, _ = _initial_state(task)
    env.set_state(init_data, init_actions, list(messages), strict=strict_replay)
    return env


def _same_db(a: Any, b: Any) -> bool:
    """Whether two database states have the same content (same hashes), cheaply when possible."""
    if a is None or b is None:
        return a is b
    if a is b:
        return True
    base_a, base_b = getattr(a, "_base", None), getattr(b, "_base", None)
    changed_a, changed_b = getattr(a, "_changed", None), getattr(b, "_changed", None)
    if base_a is None or base_a is not base_b or changed_a is None or changed_b is None:
        return a.hash("canonical") == b.hash("canonical")
    from .hashing import dumps

    for coll in set(changed_a) | set(changed_b):
        va, vb = a.data.get(coll, _MISSING), b.data.get(coll, _MISSING)
        ka, kb = changed_a.get(coll, set()), changed_b.get(coll, set())
        if ka is None or kb is None or not isinstance(va, dict) or not isinstance(vb, dict):
            if va is _MISSING or vb is _MISSING:
                if va is not vb:
                    return False
                continue
            if va is not vb and dumps(va, "canonical") != dumps(vb, "canonical"):
                return False
            continue
        for key in ka | kb:
            ra, rb = va.get(key, _MISSING), vb.get(key, _MISSING)
            if ra is rb:
                continue
            if ra is _MISSING or rb is _MISSING or dumps(ra, "canonical") != dumps(rb, "canonical"):
                return False
    return True


# --------------------------------------------------------------------------- components


def _tool_calls(messages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    calls: list[Mapping[str, Any]] = []
    for m in messages:
        if m.get("role") in ("assistant", "user") and m.get("tool_calls") is not None:
            calls.extend(m["tool_calls"])
    return calls


def _action_matches(action: Mapping[str, Any], call: Mapping[str, Any]) -> bool:
    if action["name"] != call.get("name"):
        return False
    call_args = call.get("arguments") or {}
    compare = action.get("compare_args")
    keys = list(call_args.keys()) if compare is None else list(compare)
    if not keys:
        return True
    gold_args = action.get("arguments") or {}
    return {k: v for k, v in call_args.items() if k in keys} == {k: v for k, v in gold_args.items() if k in keys}


def action_checks(
    messages: Sequence[Mapping[str, Any]],
    actions: Sequence[Mapping[str, Any]],
    tool_kind: Any = None,
) -> list[dict[str, Any]]:
    """tau2's ``ActionCheck`` dumps: one per gold action, matched against every tool call."""
    calls = _tool_calls(messages)
    out = []
    for a in actions:
        met = any(_action_matches(a, c) for c in calls)
        out.append({
            "action": _action_dump(a),
            "action_match": met,
            "action_reward": 1.0 if met else 0.0,
            "tool_type": tool_kind(a["name"]) if tool_kind is not None else None,
        })
    return out


def communicate_checks(messages: Sequence[Mapping[str, Any]], infos: Sequence[str]) -> list[dict[str, Any]]:
    """tau2's ``CommunicateCheck`` dumps (case-insensitive substring, commas removed from the text)."""
    texts = [
        m["content"] for m in messages
        if m.get("role") == "assistant" and isinstance(m.get("content"), str) and m["content"].strip()
    ]
    lowered = [t.lower().replace(",", "") for t in texts]
    out = []
    for info in infos:
        hit = next((t for t, low in zip(texts, lowered, strict=True) if info.lower() in low), None)
        if hit is not None:
            out.append({"info": info, "met": True,
                        "justification": f"Information '{info}' communicated in the message:\n '{hit}'"})
        else:
            out.append({"info": info, "met": False, "justification": f"Information '{info}' not communicated."})
    return out


def _premature(reason: str) -> dict[str, Any]:
    return {
        "reward": 0.0, "db_check": None, "env_assertions": None, "action_checks": None, "nl_assertions": None,
        "communicate_checks": None, "reward_basis": None, "reward_breakdown": None,
        "info": {"note": f"Simulation terminated prematurely. Termination reason: {reason}"},
    }


@dataclass
class _Component:
    reward: float | None
    breakdown: dict[str, float | None] | None
    info: dict[str, Any] | None = None
    note: str | None = None


def _nl_component(
    ec: Mapping[str, Any], messages: Sequence[Mapping[str, Any]], judge: Judge | None
) -> tuple[_Component, list[dict[str, Any]] | None, bool]:
    """(component, nl_assertions dump, judged)."""
    assertions = ec.get("nl_assertions")
    if not assertions:
        return _Component(1.0, {"NL_ASSERTION": 1.0}, {"note": "No nl_assertions to evaluate"}), [], True
    if judge is None:
        return _Component(None, {"NL_ASSERTION": None}, None, "NL assertions not judged: no judge configured"), None, False
    try:
        checks = judge.judge(list(messages), list(assertions))
    except JudgeError as exc:
        return _Component(None, {"NL_ASSERTION": None}, None, f"NL assertions not judged: {exc}"), None, False
    reward = 1.0 if all(c.get("met") for c in checks) else 0.0
    return _Component(reward, {"NL_ASSERTION": reward}), checks, True


def _product(values: Sequence[float | None]) -> float | None:
    """Product where ``None`` (unknown) is absorbed by a zero and otherwise propagates."""
    if any(v == 0.0 for v in values if v is not None):
        return 0.0
    if any(v is None for v in values):
        return None
    out = 1.0
    for v in values:
        out *= v  # type: ignore[operator]
    return out


# --------------------------------------------------------------------------- entry point


def evaluate(
    task: Mapping[str, Any],
    messages: Sequence[Mapping[str, Any]],
    termination_reason: str,
    domain: str | DomainData,
    *,
    solo_mode: bool = False,
    judge: Judge | None = None,
    strict: bool = False,
    data_dir: str | Path | None = None,
    predicted: Tau2Environment | None = None,
    strict_replay: bool = True,
) -> Evaluation:
    """Score one trajectory as tau2 1.0.1 does (see the module docstring).

    ``predicted``: an environment already in the trajectory's final state (a gym
    episode's live environment); otherwise the trajectory is replayed on a fresh one.
    Running env assertions may sync that environment, as in tau2.
    """
    data = _data(domain, data_dir)
    ec = _criteria(task)
    if termination_reason not in REWARDED_TERMINATIONS:
        info = _premature(termination_reason)
        return Evaluation(0.0, info, 0.0, None, strict_reward=0.0 if strict else None, predicted_env=predicted)
    if ec is None:
        info = {"reward": 1.0, "db_check": None, "env_assertions": None, "action_checks": None, "nl_assertions": None,
                "communicate_checks": None, "reward_basis": None, "reward_breakdown": None,
                "info": {"note": "No evaluation criteria"}}
        return Evaluation(1.0, info, 1.0, None, strict_reward=1.0 if strict else None, predicted_env=predicted)
    try:
        return _evaluate(task, ec, messages, data, solo_mode, judge, strict, predicted, strict_replay)
    except Exception as exc:  # tau2's evaluate_simulation raises: report it instead
        return Evaluation(None, None, None, None, {"type": type(exc).__name__, "message": str(exc)},
                          strict_reward=0.0 if strict else None, predicted_env=predicted)


def _evaluate(
    task: Mapping[str, Any],
    ec: Mapping[str, Any],
    messages: Sequence[Mapping[str, Any]],
    data: DomainData,
    solo_mode: bool,
    judge: Judge | None,
    strict: bool,
    predicted: Tau2Environment | None,
    strict_replay: bool,
) -> Evaluation:
    basis = _basis(ec)
    gold_actions = ec.get("actions")

    # ---- environment (DB + env assertions)
    pred_env, gold_env, env_info, db_check, assertion_dump, env_breakdown, env_reward = _environment_check(
        task, ec, messages, data, basis, solo_mode=solo_mode, predicted=predicted, strict_replay=strict_replay)

    # ---- actions
    tool_kind = None
    if not (solo_mode and data.spec.solo_error is not None):
        tool_kind = _kind_lookup(data)
    if not gold_actions:
        action = _Component(1.0, {"ACTION": 1.0}, {"note": "No actions to evaluate"})
        action_dump = None
    else:
        action_dump = action_checks(messages, gold_actions, tool_kind)
        r = 1.0 if all(c["action_match"] for c in action_dump) else 0.0
        action = _Component(r, {"ACTION": r})

    # ---- communicate
    infos = ec.get("communicate_info")
    if not infos:
        comm = _Component(1.0, {"COMMUNICATE": 1.0}, {"note": "No communicate_info to evaluate"})
        comm_dump = None
    else:
        comm_dump = communicate_checks(messages, infos)
        r = 1.0 if all(c["met"] for c in comm_dump) else 0.0
        comm = _Component(r, {"COMMUNICATE": r})

    # ---- NL assertions (only when in the basis, or for strict mode)
    nl: _Component | None = None
    nl_dump = None
    judged: bool | None = None
    needs_nl = "NL_ASSERTION" in basis or "NL_ASSERTIONS" in basis
    if needs_nl or (strict and ec.get("nl_assertions")):
        nl, nl_dump, judged = _nl_component(ec, messages, judge)

    # ---- combine in tau2's order: env, action, NL, communicate
    breakdown: dict[str, float | None] = {}
    factors: list[float | None] = []
    factors_without_nl: list[float | None] = []
    if set(basis) & set(_ENV_BASES):
        breakdown.update(env_breakdown or {})
        factors.append(env_reward)
        factors_without_nl.append(env_reward)
    if "ACTION" in basis:
        breakdown.update(action.breakdown or {})
        factors.append(action.reward)
        factors_without_nl.append(action.reward)
    if needs_nl and nl is not None:
        breakdown.update(nl.breakdown or {})
        factors.append(nl.reward)
    if "COMMUNICATE" in basis:
        breakdown.update(comm.breakdown or {})
        factors.append(comm.reward)
        factors_without_nl.append(comm.reward)
    reward = _product(factors)
    reward_without_nl = _product(factors_without_nl)

    info = {
        "reward": reward,
        "db_check": db_check,
        "env_assertions": assertion_dump,
        "action_checks": action_dump,
        "nl_assertions": nl_dump if needs_nl else None,
        "communicate_checks": comm_dump,
        "reward_basis": basis,
        "reward_breakdown": breakdown,
        "info": {
            "env": env_info,
            "nl": nl.info if (needs_nl and nl is not None) else None,
            "communicate": comm.info,
            "action": action.info,
        },
    }

    strict_reward = None
    if strict:
        s = [reward_without_nl]
        if gold_actions and "ACTION" not in basis:
            s.append(action.reward)
        if nl is not None:
            s.append(nl.reward if nl.reward is not None else 0.0)
        strict_reward = _product(s)
        if strict_reward is None:
            strict_reward = 0.0
        info["strict"] = {
            "reward": strict_reward,
            "components": {
                "base_without_nl": reward_without_nl,
                "ACTION": action.reward if gold_actions else None,
                "NL_ASSERTION": (nl.reward if nl is not None else None),
            },
            "note": "strict mode: gold actions (reads included) and NL assertions are required; unjudged NL counts as 0",
        }
    return Evaluation(
        reward, info, reward_without_nl, judged if needs_nl else None, None, strict_reward,
        nl.note if nl is not None else None, pred_env, gold_env,
    )


def _environment_check(task: Mapping[str, Any], ec: Mapping[str, Any], messages: Sequence[Mapping[str, Any]],
                       data: DomainData, basis: Sequence[str], *, solo_mode: bool, predicted: Tau2Environment | None,
                       strict_replay: bool) -> tuple[Any, ...]:
    """The environment part of an evaluation (final DB against the gold one, env assertions): ``(predicted env,
    gold env, note, db_check, assertions, breakdown, reward)``; the predicted env is replayed from ``messages``
    unless given."""
    gold_actions = ec.get("actions")
    assertions = ec.get("env_assertions")
    pred_env = predicted
    gold_env = None
    env_info = None
    db_check: dict[str, Any] | None
    assertion_dump: list[dict[str, Any]] | None
    if gold_actions is None and assertions is None:
        db_check = {"db_match": True, "db_reward": 1.0}
        assertion_dump = None
        env_breakdown: dict[str, float | None] | None = None
        env_reward = 1.0
        env_info = {"note": "No expected actions or env assertions"}
    else:
        if pred_env is None:
            pred_env = predicted_environment(task, messages, data, solo_mode=solo_mode, strict_replay=strict_replay)
        gold_env = gold_environment(task, data)
        match = _same_db(pred_env.db, gold_env.db) and _same_db(pred_env.user_db, gold_env.user_db)
        db_reward = 1.0 if match else 0.0
        db_check = {"db_match": match, "db_reward": db_reward}
        assertion_dump = []
        assertion_reward = 1.0
        for a in assertions or []:
            met = pred_env.run_env_assertion(
                a["func_name"], dict(a.get("arguments") or {}), a["env_type"], a.get("assert_value", True)
            )
            assertion_dump.append({"env_assertion": _assertion_dump(a), "met": met, "reward": 1.0 if met else 0.0})
            assertion_reward *= 1.0 if met else 0.0
        env_breakdown = {}
        env_reward = 1.0
        if "DB" in basis:
            env_breakdown["DB"] = db_reward
            env_reward *= db_reward
        if "ENV_ASSERTION" in basis:
            env_breakdown["ENV_ASSERTION"] = assertion_reward
            env_reward *= assertion_reward
    return pred_env, gold_env, env_info, db_check, assertion_dump, env_breakdown, env_reward


def _kind_lookup(data: DomainData) -> Any:
    kinds = dict(data._kinds)
    kinds.update(data._user_kinds)
    return kinds.get

