"""Calibration: how a policy scores on a capability environment, and difficulty tuning.

:func:`calibrate` plays ``samples`` episodes for each of ``seeds`` (a *group* is the
samples of one seed, as in group-relative RL) and reports the mean reward, the success
rate, the fraction of groups that are all 0, all 1 or constant (groups that carry no
learning signal), pass@k, and per-case means.  :func:`tune` searches the spec's
difficulty knobs, one knob at a time, for a setting whose mean reward falls in a band.

Besides any :class:`trace_gym.policies.Policy`, three baselines are built in:
``reference`` (plays the spec's reference solution), ``noop`` (never acts) and
``refuse`` (declines every request).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from ..core.outcome import is_success, success_threshold
from ..policies.base import supports
from ..progress import track

__all__ = ["CalibrationResult", "calibrate", "play_groups", "tune", "pass_at_k", "make_policy", "BASELINES"]


class _Baseline:
    policy_id = "baseline"
    env: Any = None

    def bind_env(self, env: Any) -> None:
        self.env = env


class ReferencePolicy(_Baseline):
    """Plays the current episode's reference solution."""

    policy_id = "reference"

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        actions = self.env.reference_actions()
        sent = sum(1 for m in messages if m["role"] == "assistant" and m.get("name") is None)
        return actions[sent] if sent < len(actions) else "Is there anything else I can help you with?"


class NoopPolicy(_Baseline):
    policy_id = "noop"

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        return "Okay."


class RefusePolicy(_Baseline):
    policy_id = "refuse"

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        return "I'm sorry, but I can't help with that request."


BASELINES: dict[str, Callable[[], Any]] = {"reference": ReferencePolicy, "noop": NoopPolicy, "refuse": RefusePolicy}


def make_policy(spec: str | Any, **options: Any) -> Any:
    """A baseline by name (:data:`BASELINES`), any object with ``act``, or
    :func:`trace_gym.policies.policy_from_spec(spec, **options) <trace_gym.policies.policy_from_spec>`."""
    if not isinstance(spec, str):
        if not callable(getattr(spec, "act", None)):
            raise TypeError(f"a policy needs an act(messages, tools) method; got {type(spec).__name__}")
        return spec
    if spec in BASELINES:
        return BASELINES[spec]()
    from ..policies import policy_from_spec

    return policy_from_spec(spec, **options)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for ``c`` successes out of ``n`` samples."""
    if k > n:
        raise ValueError(f"k={k} > n={n}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


@dataclass
class CalibrationResult:
    env_id: str
    policy: str
    seeds: list[int]
    samples: int
    difficulty: dict[str, float]
    rewards: dict[int, list[float]] = field(default_factory=dict)
    cases: dict[int, str] = field(default_factory=dict)
    threshold: float = 1.0  # the env's success threshold (trace_gym.core.outcome.success_threshold)

    @property
    def all_rewards(self) -> list[float]:
        return [r for rs in self.rewards.values() for r in rs]

    @property
    def mean_reward(self) -> float:
        rs = self.all_rewards
        return sum(rs) / len(rs) if rs else 0.0

    def summary(self) -> dict[str, Any]:
        groups = list(self.rewards.values())
        n = len(groups) or 1
        rs = self.all_rewards
        per_case: dict[str, list[float]] = {}
        for seed, vals in self.rewards.items():
            per_case.setdefault(self.cases.get(seed, "?"), []).extend(vals)
        out = {
            "env_id": self.env_id,
            "policy": self.policy,
            "seeds": len(self.seeds),
            "samples": self.samples,
            "episodes": len(rs),
            "difficulty": self.difficulty,
            "mean_reward": round(self.mean_reward, 6),
            "success_rate": round(sum(is_success(r, self.threshold) for r in rs) / len(rs), 6) if rs else 0.0,
            "groups_all_zero": round(sum(all(r == 0.0 for r in g) for g in groups) / n, 6),
            "groups_all_one": round(sum(all(is_success(r, self.threshold) for r in g) for g in groups) / n, 6),
            "groups_constant": round(sum(len(set(g)) <= 1 for g in groups) / n, 6),
            "pass_at_k": {
                str(k): round(sum(pass_at_k(len(g), sum(is_success(r, self.threshold) for r in g), k) for g in groups) / n, 6)
                for k in range(1, self.samples + 1)
            },
            "per_case": {c: {"episodes": len(v), "mean_reward": round(sum(v) / len(v), 6)} for c, v in sorted(per_case.items())},
        }
        return out

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["summary"] = self.summary()
        return d


def play_groups(make_env: Callable[[], Any], policy: Any, seeds: list[int], samples: int, *, slots: int,
                on_episode: Callable[[float], None] | None = None) -> tuple[dict[int, list[float]], dict[int, str], list[str]]:
    """Play ``samples`` episodes of each seed (a group per seed) and return ``(rewards, cases, errors)``.

    The one play loop of calibration: :func:`~trace_gym.rollout.rollout_queue` on ``slots`` fresh envs
    from ``make_env`` (a slot whose episode ends starts the next one), or on one env when the policy
    cannot batch (no ``act_batch``, ``batchable`` false) or reads the env it plays (``bind_env``, as the
    baselines do).  The policy's episode seed is ``seed * 1000 + sample``.  An episode's reward is its
    last step's (a full context ends it as the env scores a truncated episode).  A policy failure
    (:class:`~trace_gym.policies.base.PolicyError`) scores the episode it failed on 0 and is listed in
    ``errors``; the episodes not yet ended are played again from their start (a group's rewards are then
    in the order its episodes ended).  ``on_episode(reward)`` follows every episode.  ``ValueError`` for
    ``samples`` or ``slots`` below 1.
    """
    from ..rollout import RolloutError, rollout_queue

    if samples < 1 or slots < 1:
        raise ValueError(f"play_groups needs samples >= 1 and slots >= 1, got {samples} and {slots}")
    batched = (slots > 1 and supports(policy, "batchable") and supports(policy, "act_batch")
               and not supports(policy, "bind_env"))
    jobs = [(s, k) for s in seeds for k in range(samples)]
    rewards: dict[int, list[float]] = {s: [] for s in seeds}
    cases: dict[int, str] = {}
    errors: list[str] = []

    def final(t: Any) -> float:
        return float(t.rewards[-1]) if t.rewards else 0.0  # the final step (or the cut) carries the reward

    def tick(t: Any) -> None:
        if on_episode:
            on_episode(final(t))

    def record(seed: int, t: Any, reward: float) -> None:
        job = next((job for job in jobs if job[0] == seed), jobs[0])
        rewards[job[0]].append(reward)
        cases[job[0]] = (t.reset_info or {}).get("case", cases.get(job[0], "?"))
        jobs.remove(job)

    envs = [make_env() for _ in range(min(slots if batched else 1, len(jobs)))]
    try:
        while jobs:
            try:
                trajs = rollout_queue(envs[: len(jobs)], policy, [s for s, _ in jobs],
                                      policy_seeds=[s * 1000 + k for s, k in jobs], on_episode=tick)
            except RolloutError as exc:  # keep what ended, score the failed episode 0, play the rest again
                errors.append(str(exc)[:300])
                for t in exc.completed:
                    record(t.seed, t, final(t))
                record(exc.trajectory.seed, exc.trajectory, 0.0)
                if on_episode:
                    on_episode(0.0)
                continue
            for t in trajs:  # in seed order, as the jobs
                record(t.seed, t, final(t))
    finally:
        for e in envs:
            e.close()
    return rewards, cases, errors


def calibrate(env_id: str, policy: Any, seeds: list[int], samples: int, *, difficulty: dict[str, float] | None = None,
              env_kwargs: dict[str, Any] | None = None, on_episode: Callable[[], None] | None = None) -> CalibrationResult:
    """Play ``samples`` episodes per seed and collect the rewards."""
    import gymnasium as gym

    import trace_gym  # noqa: F401

    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    kwargs = dict(env_kwargs or {})
    if difficulty:
        kwargs["difficulty"] = dict(difficulty)
    env = gym.make(env_id, **kwargs).unwrapped
    if not hasattr(env, "cap_spec"):
        raise TypeError(f"{env_id} is not a capability environment")
    result = CalibrationResult(env_id, getattr(policy, "policy_id", type(policy).__name__), list(seeds), samples, dict(env.knob_values),
                               threshold=success_threshold(env))
    env.close()
    with track(f"calibrate {env_id}", total=len(seeds) * samples) as bar:
        def tick(reward: float) -> None:
            bar.tick(reward)
            if on_episode:
                on_episode()

        slots = max(1, int(getattr(policy, "batch_size", 8) or 8))
        rewards, cases, errors = play_groups(lambda: gym.make(env_id, **kwargs), policy, list(seeds), samples, slots=slots,
                                             on_episode=tick)
        if errors:  # a failing policy stops calibration, as it stops a rollout
            from ..policies.base import PolicyError

            raise PolicyError(f"{result.policy} failed while calibrating {env_id}: {errors[0]}")
    result.rewards.update(rewards)
    result.cases.update(cases)
    return result


def _distance(mean: float, band: tuple[float, float]) -> float:
    lo, hi = band
    if lo <= mean <= hi:
        return 0.0
    return lo - mean if mean < lo else mean - hi


def tune(env_id: str, policy: Any, seeds: list[int], samples: int, band: tuple[float, float], *, max_rounds: int = 4,
         env_kwargs: dict[str, Any] | None = None, on_episode: Callable[[], None] | None = None,
         log: Callable[[str], None] | None = None, start: CalibrationResult | None = None,
         max_episodes: int | None = None) -> tuple[dict[str, float], CalibrationResult, list[dict[str, Any]]]:
    """Coordinate search over the spec's knobs for a mean reward inside ``band``.

    Returns the best knob values, their calibration and the search trace.  ``start``: the
    env's calibration at its current knobs, already measured (with the same ``seeds`` and
    ``samples``), so the search does not play it again.  ``max_episodes``: the search plays
    no candidate that would take it past this many episodes; it stops there and returns the
    best setting found so far (the trace's last entry then says ``stopped``).
    """
    import gymnasium as gym

    import trace_gym  # noqa: F401

    lo, hi = band
    if not 0.0 <= lo <= hi <= 1.0:
        raise ValueError(f"band must satisfy 0 <= low <= high <= 1, got {band}")
    env = gym.make(env_id, **(env_kwargs or {})).unwrapped
    decl = env.cap_spec.data.get("difficulty", {})
    current = dict(env.knob_values)
    env.close()
    if max_episodes is not None and max_episodes < 0:
        raise ValueError(f"max_episodes must be >= 0, got {max_episodes}")
    trace: list[dict[str, Any]] = []
    cost, played = len(seeds) * samples, [0]

    def run(values: dict[str, float]) -> CalibrationResult:
        if max_episodes is not None and played[0] + cost > max_episodes:
            raise _SearchCapped
        res = calibrate(env_id, policy, seeds, samples, difficulty=values, env_kwargs=env_kwargs, on_episode=on_episode)
        played[0] += cost
        trace.append({"difficulty": dict(values), "mean_reward": res.mean_reward})
        if log:
            log(f"{values} -> mean reward {res.mean_reward:.3f}")
        return res

    best = dict(current)
    if start is not None:
        best_res = start
        trace.append({"difficulty": dict(current), "mean_reward": start.mean_reward, "measured": "before the search"})
    else:
        try:
            best_res = run(current)
        except _SearchCapped:
            raise ValueError(f"max_episodes={max_episodes} leaves no room to measure the current setting "
                             f"({cost} episodes); pass start= or a larger cap") from None
    state: dict[str, Any] = {"best": best, "res": best_res}
    try:
        _search(decl, state, band, max_rounds, run, trace)
    except _SearchCapped:
        trace.append({"stopped": f"the next setting would pass max_episodes={max_episodes}"})
    return state["best"], state["res"], trace


class _SearchCapped(Exception):
    """The knob search's next setting would pass its episode cap."""


def _search(decl: dict[str, Any], state: dict[str, Any], band: tuple[float, float], max_rounds: int,
            run: Callable[[dict[str, float]], CalibrationResult], trace: list[dict[str, Any]]) -> None:
    """Coordinate search from ``state`` (``best`` knobs, their result ``res``), updating it after every improvement.

    Knobs that declare which way is ``harder`` are only moved the way that helps (easier when
    the mean is below the band, harder above it), and the search first tries every such knob at
    that extreme at once: when every knob declares a direction and even that setting stays on
    the same side of the band, no setting reaches it and the search stops there.  Knobs without
    a direction are tried both ways; a knob declared ``tune: false`` (what the task is made of,
    not how hard it is) is never moved.
    """
    decl = {n: k for n, k in decl.items() if k.get("tune", True)}
    def gap(res: CalibrationResult) -> float:
        return _distance(res.mean_reward, band)

    def keep(values: dict[str, float], res: CalibrationResult) -> bool:
        if gap(res) < gap(state["res"]):
            state.update(best=values, res=res)
            return True
        return False

    def toward(k: dict[str, Any], below: bool) -> str | None:
        """'max' or 'min': the end of knob ``k`` that raises the mean (``below``) or lowers it; None if undeclared."""
        if k.get("harder") not in ("up", "down"):
            return None
        return "max" if (k["harder"] == "down") == below else "min"

    if gap(state["res"]) == 0.0:
        return
    below = state["res"].mean_reward < band[0]
    extreme = {**state["best"], **{n: _as_knob(k, k[end]) for n, k in decl.items() if (end := toward(k, below))}}
    if extreme != state["best"]:
        res = run(extreme)
        keep(extreme, res)
        if all(toward(k, below) for k in decl.values()) and (res.mean_reward < band[0]) == below and gap(res) > 0.0:
            trace.append({"stopped": "the band is out of reach: every directed knob at its "
                                     f"{'easiest' if below else 'hardest'} end still misses it"})
            return
    for _ in range(max_rounds):
        if gap(state["res"]) == 0.0:
            return
        below = state["res"].mean_reward < band[0]
        improved = False
        for name, k in decl.items():
            cur, end = state["best"][name], toward(k, below)
            cands = {k["min"], k["max"], (k["min"] + cur) / 2, (cur + k["max"]) / 2}
            if end is not None:  # only the side that moves the mean toward the band
                cands = {v for v in cands if (v > cur) == (end == "max")}
            for v in sorted(cands, key=lambda c: -abs(c - cur)):  # the far end first
                v = _as_knob(k, v)
                if v == state["best"][name]:
                    continue
                trial = {**state["best"], name: v}
                improved = keep(trial, run(trial)) or improved
                if gap(state["res"]) == 0.0:
                    return
        if not improved:
            return


def _as_knob(k: dict[str, Any], v: float) -> float:
    return int(round(v)) if k.get("type") == "int" else round(float(v), 4)
