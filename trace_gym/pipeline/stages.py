"""The first four TRACE stages: rollouts → analysis → synthesis → calibration.

Each stage is a plain function that returns a typed result (a
:class:`~trace_gym.pipeline.store.StageOutput`); :mod:`trace_gym.pipeline.loop` runs them
in order through a :class:`~trace_gym.pipeline.store.StageStore`.  Each also resumes on
its own as far as its pieces allow: trajectory stores skip stored episodes, the analysis
reuses stored labeling runs, synthesis keeps existing specs and calibration keeps each
env's stored result.  Every episode played for learning is charged to the optional
:class:`~trace_gym.pipeline.budget.RolloutBudget`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.outcome import is_success, success_threshold
from ..io import atomic_write_json
from ..policies.base import supports
from ..progress import track
from ..synthesis.register import register_spec_files_once
from .budget import BudgetedEnv, RolloutBudget
from .store import StageOutput
from .target import Target

__all__ = [
    "RolloutJob", "Rollouts", "play_rollouts",
    "Analysis", "analyze", "analysis_result",
    "Synthesis", "synthesize_envs", "capability_factory",
    "Calibration", "calibrate_envs", "env_kwargs_for",
]

Progress = Callable[[], None] | None


# ----------------------------------------------------------------------------- 1. rollouts
@dataclass
class RolloutJob:
    """One episode to play: ``policy`` (a policy, or a zero-argument callable loading one) on ``task`` with ``seed``.

    ``env_kwargs`` are set on top of the target's own (a step limit for the model, say).
    """

    policy_id: str
    task: str
    seed: int
    policy: Any
    env_kwargs: dict[str, Any] | None = None


@dataclass
class Rollouts(StageOutput):
    path: str
    n: int = 0                     # episodes in the store
    passed: int = 0                # of those, successes by the target's threshold
    by_policy: dict[str, dict[str, int]] = field(default_factory=dict)  # policy id -> episodes, passed
    policy_failures: int = 0       # episodes cut short because the policy failed (stored as played so far)
    rollouts: int = 0              # episodes charged to the budget (all played episodes without one)

    def artifacts(self) -> list[str]:
        return [self.path]

    def trajectories(self) -> list[Any]:
        from ..rollout import TrajectoryStore

        return TrajectoryStore(self.path).load()


def play_rollouts(target: Target, jobs: list[RolloutJob], store_path: str | Path, *, budget: RolloutBudget | None = None,
                  stage: str = "base_rollouts", batch_size: int = 1, on_episode: Progress = None) -> Rollouts:
    """Play every job not already in the store, consecutive jobs of one policy in lock-step batches.

    A policy failure keeps the episode as played so far (and the batch's finished ones)
    and counts in ``policy_failures``; the run goes on with the next batch.
    """
    from ..rollout import RolloutError, TrajectoryStore, episode_key, rollout_batch

    store = TrajectoryStore(store_path)
    have = store.keys() if store.path.exists() else set()

    def key(j: RolloutJob) -> tuple[str, str, int, str]:
        return episode_key(target.env_id, j.policy_id, j.seed, target.reset_options(j.task))

    todo = [j for j in jobs if key(j) not in have]
    if budget is not None:
        budget.start_stage(stage, len(jobs) - len(todo))
    bar = track(f"rollouts on {target.env_id}", total=len(jobs))
    bar.skip(len(jobs) - len(todo))
    for _ in range(len(jobs) - len(todo)):
        if on_episode:
            on_episode()
    failures, loaded = 0, {}  # id(job.policy) -> the policy it is or loads
    pools: dict[str, list[Any]] = {}  # env kwargs -> envs made with them (reused from batch to batch)
    try:
        i = 0
        while i < len(todo):
            pol, kw = todo[i].policy, todo[i].env_kwargs
            if id(pol) not in loaded:  # a loader is called once, when its first episode is due
                loaded[id(pol)] = pol() if isinstance(pol, type) or not hasattr(pol, "act") else pol
            policy = loaded[id(pol)]
            size = batch_size if supports(policy, "batchable") else 1
            chunk = [todo[i]]
            while (len(chunk) < size and i + len(chunk) < len(todo) and todo[i + len(chunk)].policy is pol
                   and todo[i + len(chunk)].env_kwargs == kw):
                chunk.append(todo[i + len(chunk)])
            i += len(chunk)
            envs = pools.setdefault(json.dumps(kw or {}, sort_keys=True, default=str), [])
            while len(envs) < len(chunk):
                envs.append(target.make(budget, stage, kw))
            opts = [target.reset_options(j.task) for j in chunk]
            try:
                trajs = rollout_batch(envs[: len(chunk)], policy, [j.seed for j in chunk], opts)
            except RolloutError as exc:
                trajs, failures = [*exc.completed, exc.trajectory], failures + 1
            for t in trajs:
                t.env_id = target.env_id
                store.append(t)
                bar.tick(t)
                if on_episode:
                    on_episode()
    except BaseException:
        bar.close(aborted=True)
        raise
    finally:
        bar.close()
        for envs in pools.values():
            for e in envs:
                e.close()
    trajs = store.load()
    by_policy: dict[str, dict[str, int]] = {}
    for t in trajs:
        row = by_policy.setdefault(t.policy_id, {"episodes": 0, "passed": 0})
        row["episodes"] += 1
        row["passed"] += int(is_success(t.reward, target.threshold))
    return Rollouts(str(store.path), len(trajs), sum(r["passed"] for r in by_policy.values()), by_policy, failures,
                    budget.stage_used(stage) if budget is not None else len(trajs))


# ----------------------------------------------------------------------------- 2. analysis
@dataclass
class Analysis(StageOutput):
    capabilities_json: str
    selected: list[str] = field(default_factory=list)   # capabilities passing the thresholds, ranked
    chosen: list[str] = field(default_factory=list)     # the ones synthesis will target
    fallback: list[str] = field(default_factory=list)   # chosen below the thresholds, to reach ``min_capabilities``
    summaries: list[dict[str, Any]] = field(default_factory=list)
    gaps: dict[str, float] = field(default_factory=dict)  # selected capability -> mean contrastive gap
    n_failed: int = 0
    n_passed: int = 0
    plot: str | None = None

    def artifacts(self) -> list[str]:
        return [self.capabilities_json] + ([self.plot] if self.plot else [])


def analyze(rollouts: Rollouts, out: str | Path, *, seed: int, threshold: float = 1.0, min_capabilities: int = 0,
            max_capabilities: int | None = None, plot: bool = True) -> Analysis:
    """Offline contrastive analysis (one labeling run, gold labeler): which capabilities the failures lack.

    At most ``max_capabilities`` selected ones are chosen; when fewer than
    ``min_capabilities`` pass the thresholds, the next ones most often lacking on failed
    trajectories are added (``fallback``).
    """
    from ..analysis.aggregate import Thresholds
    from ..analysis.labelers import GoldLabeler
    from ..analysis.pipeline import run_analysis
    from ..analysis.taxonomy import TAXONOMY

    out = Path(out)
    _, doc = run_analysis(rollouts.path, out, GoldLabeler(), list(TAXONOMY), runs=1,
                          thresholds=Thresholds(k=1, success=threshold), seed=seed)
    return analysis_result(doc, out, min_capabilities=min_capabilities, max_capabilities=max_capabilities, plot=plot)


def analysis_result(doc: dict[str, Any], out: str | Path, *, min_capabilities: int = 0, max_capabilities: int | None = None,
                    plot: bool = True) -> Analysis:
    """The :class:`Analysis` of an analysis document (``capabilities.json``, as
    :func:`~trace_gym.analysis.pipeline.run_analysis` wrote it into ``out``): at most ``max_capabilities``
    selected ones are chosen, and when fewer than ``min_capabilities`` passed the thresholds, the next ones most
    often lacking on failed trajectories are added (``fallback``); with ``plot``, ``out/capabilities.png``."""
    out = Path(out)
    selected = list(doc["selected"])
    chosen = selected[:max_capabilities] if max_capabilities is not None else list(selected)
    fallback = []
    if len(chosen) < min_capabilities:
        rest = sorted((c for c in doc["capabilities"] if c["capability"] not in chosen and c["mean_coverage"] > 0),
                      key=lambda c: (-c["mean_coverage"], -c["mean_gap"], c["capability"]))
        for c in rest[: min_capabilities - len(chosen)]:
            chosen.append(c["capability"])
            fallback.append(c["capability"])
    png = None
    if plot:
        from ..analysis.report import plot_capabilities

        made = plot_capabilities(doc, out / "capabilities.png")
        png = str(made) if made else None
    return Analysis(
        str(out / "capabilities.json"), selected, chosen, fallback,
        [{k: c[k] for k in ("capability", "mean_coverage", "mean_gap", "selected")} for c in doc["capabilities"]],
        {s["capability"]: round(s["mean_gap"], 3) for s in doc["capabilities"] if s["selected"]},
        doc["inputs"]["n_failed"], doc["inputs"]["n_passed"], png)


# ----------------------------------------------------------------------------- 3. synthesis
@dataclass
class Synthesis(StageOutput):
    outcomes: list[dict[str, Any]] = field(default_factory=list)  # one per chosen capability (status, spec, reasons)
    envs: list[dict[str, Any]] = field(default_factory=list)      # made envs: capability, spec, env_id
    report: str | None = None

    def artifacts(self) -> list[str]:
        return ([self.report] if self.report else []) + [e["spec"] for e in self.envs]


def synthesize_envs(analysis: Analysis, domain: str, out: str | Path, *, seed: int, max_envs: int | None = None,
                    client: Any = None) -> Synthesis:
    """One capability env spec per chosen capability (at most ``max_envs`` made), registered in this process;
    ``client`` (a :class:`~trace_gym.llm.ChatClient`) drafts a spec for a capability no template covers."""
    from ..analysis.pipeline import load_capabilities
    from ..synthesis import synthesize
    from ..synthesis.synthesize import synthesis_domains

    out = Path(out)
    if not analysis.chosen:
        return Synthesis()
    if domain not in synthesis_domains():  # no capability template or tool world for this domain: nothing to make
        why = f"no capability environments can be synthesized for the {domain!r} domain (known: {synthesis_domains()})"
        return Synthesis([{"capability": c, "status": "skipped", "spec_id": None, "path": None, "template": None,
                           "reasons": [why]} for c in analysis.chosen])
    outcomes = synthesize(load_capabilities(analysis.capabilities_json), domain, out, client=client, seed=seed,
                          only=analysis.chosen)
    made = [o for o in outcomes if o.path][:max_envs]
    ids = register_spec_files_once([str(o.path) for o in made])
    report = next((p for p in (out / "_synthesis.json", out / "synthesis.json") if p.exists()), None)
    return Synthesis([dataclasses.asdict(o) for o in outcomes],
                     [{"capability": o.capability, "spec": str(o.path), "env_id": i} for o, i in zip(made, ids, strict=True)],
                     str(report) if report else None)


def capability_factory(spec_path: str | Path, env_kwargs: dict[str, Any], budget: RolloutBudget | None,
                       stage: str) -> Callable[[], Any]:
    """Fresh capability envs built straight from a spec file (no registry lookup, so no stale registration)."""
    from ..capabilities.env import CapabilityEnv

    def make() -> Any:
        env: Any = CapabilityEnv(str(spec_path), **env_kwargs)
        if budget is not None:
            env = BudgetedEnv(env, budget, stage)
        return env

    return make


# ----------------------------------------------------------------------------- 4. calibration
@dataclass
class Calibration(StageOutput):
    envs: list[dict[str, Any]] = field(default_factory=list)  # synthesis rows + mean_reward, train, reference_mean_reward, ...
    rollouts: int = 0

    def artifacts(self) -> list[str]:
        return [e["calibration"] for e in self.envs if e.get("calibration")]


def calibrate_envs(synthesis: Synthesis, policy: Callable[[], Any], *, seed: int, seeds: int, samples: int,
                   env_kwargs: dict[str, Any], budget: RolloutBudget | None = None, batch_size: int = 1,
                   reference_seeds: int = 0, mastered: float | None = None,
                   band: tuple[float, float] | None = None, tune_rounds: int = 0, tune_reserve: int = 0,
                   tune_episodes: int | None = None, set_knobs: dict[str, float] | None = None,
                   on_episode: Callable[[str], None] | None = None) -> Calibration:
    """The base model's score on each synthesized env (``seeds`` × ``samples`` episodes, charged to ``budget``).

    With a ``band`` (the paper's 20–60% base success, as mean reward) and ``tune_rounds``,
    an env whose mean reward falls outside it has its difficulty knobs searched
    (:func:`trace_gym.capabilities.calibrate.tune`, every episode charged) and is trained
    and routed at the best setting found (``difficulty`` in its row; ``in_band`` says
    whether the band was reached).  The search starts from the measured setting and, with a
    ``budget``, leaves ``tune_reserve`` rollouts (the training share) plus the calibration of
    the envs still to measure untouched: it stops at the best setting found so far rather
    than spend them (``tune_stopped`` in the row says why it stopped, or why it did not
    start).  ``tune_episodes`` caps each env's search on its own (budget or not).  An env
    whose mean reward reaches ``mastered`` needs no adapter (``train`` false).  ``reference_seeds`` episodes of the spec's reference
    solution (not charged) check that the env is solvable.  ``set_knobs``: knob settings each env
    that declares the knob is measured, tuned from, trained and routed at (:func:`with_knobs`; its
    row's ``difficulty`` then holds every knob value).  Each env's result is kept
    next to its spec (``<spec>.calibration.json``) and reused when the stage runs again.
    """
    from ..capabilities.calibrate import CalibrationResult, ReferencePolicy, play_groups, tune

    seed_list = [seed + s for s in range(seeds)]
    tuning = {"band": [float(band[0]), float(band[1])], "rounds": int(tune_rounds)} if band is not None and tune_rounds > 0 else None
    if tuning is not None and tune_episodes is not None:
        tuning["max_episodes"] = int(tune_episodes)
    kwargs_of = {e["spec"]: with_knobs(e["spec"], env_kwargs, set_knobs) for e in synthesis.envs}  # per env
    cached: dict[str, dict[str, Any]] = {}
    for e in synthesis.envs:
        path = Path(e["spec"]).with_suffix(".calibration.json")
        if path.exists():
            doc = json.loads(path.read_text(encoding="utf-8"))
            if (doc.get("seeds") == seed_list and doc.get("samples") == samples and doc.get("env_kwargs") == kwargs_of[e["spec"]]
                    and doc.get("tune") == tuning):
                cached[e["spec"]] = doc
    if budget is not None:
        budget.start_stage("calibration", sum(d["model"]["episodes"] + _tune_episodes(d) for d in cached.values()))
    loaded: list[Any] = []
    rows = []
    for i, e in enumerate(synthesis.envs):
        path = Path(e["spec"]).with_suffix(".calibration.json")
        doc = cached.get(e["spec"])
        kw = kwargs_of[e["spec"]]
        if doc is None:
            if not loaded:
                loaded.append(policy())
            make = capability_factory(e["spec"], kw, budget, "calibration")
            probe = make()
            knobs, threshold = dict(getattr(probe.unwrapped, "knob_values", {})), success_threshold(probe)
            probe.close()
            with track(f"calibrate {e['env_id']}", total=len(seed_list) * samples) as bar:
                def tick(reward: float, name: str = e["env_id"], bar: Any = bar) -> None:
                    bar.tick(reward)
                    if on_episode:
                        on_episode(name)

                rewards, cases, errors = play_groups(make, loaded[0], seed_list, samples, slots=batch_size, on_episode=tick)
            model = CalibrationResult(e["env_id"], getattr(loaded[0], "policy_id", "policy"), seed_list, samples, knobs,
                                      rewards, cases, threshold)
            tuned, tune_played, tune_note = None, 0, None
            if tuning is not None and not band[0] <= model.mean_reward <= band[1]:
                register_spec_files_once([e["spec"]])  # the search makes the env by id (a resumed run has not registered it yet)
                later = sum(len(seed_list) * samples for f in synthesis.envs[i + 1 :] if f["spec"] not in cached)
                tuned, tune_played, tune_note = _tune_env(e["env_id"], loaded[0], model, band, tune_rounds, kw, budget,
                                               tune, reserve=tune_reserve + later, cap=tune_episodes)
            ref_summary = None
            if reference_seeds:
                ref_kwargs = {k: v for k, v in kw.items() if k != "max_steps"}
                if tuned is not None:
                    ref_kwargs["difficulty"] = tuned["difficulty"]
                ref_make = capability_factory(e["spec"], ref_kwargs, None, "")
                ref_seeds = list(range(reference_seeds))
                r_rewards, r_cases, _ = play_groups(ref_make, ReferencePolicy(), ref_seeds, 1, slots=1)
                ref_summary = CalibrationResult(e["env_id"], "reference", ref_seeds, 1, knobs, r_rewards, r_cases,
                                                threshold).summary()
            doc = {"seeds": seed_list, "samples": samples, "env_kwargs": kw, "model": model.summary(),
                   "reference": ref_summary, "policy_errors": errors, "tune": tuning, "tuned": tuned,
                   "tune_episodes": tune_played, "tune_note": tune_note}
            atomic_write_json(path, doc)
        tuned = doc.get("tuned")
        m = tuned["model"] if tuned else doc["model"]
        row = {**e, "calibration": str(path), "mean_reward": m["mean_reward"], "success_rate": m["success_rate"],
               "groups_constant": m["groups_constant"], "episodes": doc["model"]["episodes"] + _tune_episodes(doc),
               "policy_errors": doc["policy_errors"], "reference_mean_reward": (doc["reference"] or {}).get("mean_reward"),
               "train": mastered is None or m["mean_reward"] < mastered}
        if tuned:
            tried = [t for t in tuned.get("trace", []) if "difficulty" in t]
            row.update(difficulty=tuned["difficulty"], untuned_mean_reward=doc["model"]["mean_reward"],
                       tune_settings=len(tried), tune_changed=tuned["difficulty"] != doc["model"].get("difficulty"),
                       tune_stopped=next((t["stopped"] for t in tuned.get("trace", []) if "stopped" in t), None))
        elif doc.get("tune_note"):
            row["tune_stopped"] = doc["tune_note"]
        if not tuned and "difficulty" in kw:  # set knobs: trained and routed at them too
            row["difficulty"] = dict(doc["model"]["difficulty"])
        if band is not None:
            row["in_band"] = band[0] <= m["mean_reward"] <= band[1]
        rows.append(row)
    return Calibration(rows, budget.stage_used("calibration") if budget is not None else sum(r["episodes"] for r in rows))


def _tune_episodes(doc: dict[str, Any]) -> int:
    """Episodes an env's knob search played (charged even when it found nothing to keep)."""
    return int(doc.get("tune_episodes", (doc.get("tuned") or {}).get("episodes", 0)))


def _tune_env(env_id: str, policy: Any, start: Any, band: tuple[float, float], rounds: int, env_kwargs: dict[str, Any],
              budget: RolloutBudget | None, tune: Callable[..., Any], *, reserve: int = 0,
              cap: int | None = None) -> tuple[dict[str, Any] | None, int, str | None]:
    """The knob search of one env toward ``band`` from its measured calibration ``start`` (each episode charged to
    ``budget``, leaving ``reserve`` of it untouched; at most ``cap`` episodes): the best knobs and their score, and
    the episodes played.

    ``None`` when no setting could be tried within the budget, or the budget ran out during the
    search (the env keeps its synthesized knobs), with a note saying so; the episodes played are
    returned either way.
    """
    from .budget import BudgetExceeded

    played = [0]

    def charge() -> None:
        played[0] += 1
        if budget is not None:
            budget.charge("calibration")

    if budget is not None:
        left = max(0, budget.remaining - reserve)
        cap = left if cap is None else min(cap, left)
    cost = len(start.seeds) * start.samples
    if cap is not None and cap < cost:
        why = (f"no knob search: a setting costs {cost} episodes, {budget.remaining} rollouts are left and training "
               f"and routing keep {reserve}" if budget is not None and cap == left else
               f"no knob search: a setting costs {cost} episodes, the cap is {cap}")
        return None, 0, why
    try:
        best, res, trace = tune(env_id, policy, start.seeds, start.samples, tuple(band), max_rounds=rounds,
                                env_kwargs=env_kwargs, on_episode=charge, start=start, max_episodes=cap)
    except BudgetExceeded:
        return None, played[0], f"the budget ran out during the knob search after {played[0]} episodes"
    tuned = {"difficulty": best, "model": res.summary(), "trace": trace, "episodes": played[0], "max_episodes": cap}
    return tuned, played[0], None


def with_knobs(spec_path: str | Path, env_kwargs: dict[str, Any], knobs: dict[str, float] | None) -> dict[str, Any]:
    """``env_kwargs`` with the settings of ``knobs`` that the spec at ``spec_path`` declares added to its
    ``difficulty`` (a knob the spec lacks is not its business; out-of-range values fail when the env is made)."""
    if not knobs:
        return dict(env_kwargs)
    from ..capabilities.spec import load_spec

    declared = load_spec(spec_path).data.get("difficulty", {})
    mine = {k: v for k, v in knobs.items() if k in declared}
    if not mine:
        return dict(env_kwargs)
    return {**env_kwargs, "difficulty": {**dict(env_kwargs.get("difficulty") or {}), **mine}}


def env_kwargs_for(row: dict[str, Any], env_kwargs: dict[str, Any]) -> dict[str, Any]:
    """The kwargs a calibrated env is trained and routed with: ``env_kwargs`` plus its tuned difficulty, if any."""
    return {**env_kwargs, "difficulty": row["difficulty"]} if row.get("difficulty") else dict(env_kwargs)
