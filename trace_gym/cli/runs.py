"""``--run DIR``: the TRACE loop by hand, one stage verb at a time, in one folder.

``trace-gym rollout ENV_ID --run DIR --policy SPEC`` starts a run: ``DIR/run.json`` records the target
and the model (:class:`~trace_gym.pipeline.folder.RunFolder`).  Every later stage verb takes the same
``--run DIR`` and finds there what the one before it wrote::

    rollout → analyze → synthesize → sft (or train) → route → eval

Each stage's result is a :class:`~trace_gym.pipeline.store.StageStore` record under ``DIR/stages``,
fingerprinted with the verb's settings and the records it read: a verb run again with the same
settings on the same inputs does nothing, one whose settings or inputs changed runs again, and an
interrupted one continues from what its stores kept (episodes, labeling runs, specs, checkpoints).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import UsageError

__all__ = ["STAGE_VERBS", "RUN_HELP", "open_run", "need", "refuse_with_run", "run_stage", "trainable_model",
           "generation", "use_run_specs", "loading_model"]

# the verb that makes each stage's record in a run folder
STAGE_VERBS = {"rollouts": "rollout ENV_ID --policy SPEC", "analysis": "analyze", "synthesis": "synthesize",
               "calibration": "synthesize", "training": "sft", "routing": "route"}
# how the run's model generates in every verb that plays it (rollout's flags set them; run.json keeps them)
GENERATION = ("max_new_tokens", "temperature", "greedy", "seed", "batch_size", "device")
RUN_HELP = "the run folder (what this verb reads and writes there is said above)"


def open_run(path: str | os.PathLike[str]) -> Any:
    """The run folder at ``path`` (``run.json`` there); a :class:`UsageError` saying how to start one."""
    from trace_gym.pipeline.folder import RunError, RunFolder

    run = RunFolder(Path(path))
    try:
        doc = run.settings()
    except RunError as exc:
        raise UsageError(str(exc)) from None
    if doc is None:
        raise UsageError(f"{path} holds no run (no run.json): start one with "
                         f"`trace-gym rollout ENV_ID --run {path} --policy SPEC`")
    return run


def need(run: Any, name: str, result_type: type) -> Any:
    """Stage ``name``'s stored result in ``run``; a :class:`UsageError` naming the verb that makes it."""
    res = run.stage(name, result_type)
    if res is None:
        raise UsageError(f"{run.root} has no {name} yet: run `trace-gym {STAGE_VERBS[name]} --run {run.root}` first")
    return res


def refuse_with_run(args: argparse.Namespace, **flags: Any) -> None:
    """A :class:`UsageError` for the first of ``flags`` (flag name -> value given) set beside ``--run``: the run
    folder decides it."""
    for flag, value in flags.items():
        if value not in (None, False, [], ""):
            raise UsageError(f"--{flag.replace('_', '-')} and --run: the run folder {args.run} decides it; leave it out")


def _changed(old: dict[str, Any] | None, new: dict[str, Any]) -> str:
    old = old or {}
    settings = sorted(k for k in set(old.get("settings") or {}) | set(new["settings"])
                      if (old.get("settings") or {}).get(k) != new["settings"].get(k))
    inputs = sorted(k for k in new["after"] if (old.get("after") or {}).get(k) != new["after"][k])
    parts = ([f"settings changed: {', '.join(settings)}"] if settings else []) + (
        [f"new input from stage {', '.join(inputs)}"] if inputs else [])
    return "; ".join(parts) or "its record is stale"


def run_stage(run: Any, name: str, fn: Callable[[], Any], result_type: type, *, settings: dict[str, Any],
              after: tuple[str, ...] = ()) -> tuple[Any, bool]:
    """Stage ``name`` of ``run`` through its store (see the module docstring): ``(result, ran)``; a line on stderr
    says whether it was done before or why it runs again."""
    import sys

    from trace_gym.pipeline.store import StageStore

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    store = run.store(settings, after)
    rec, why = store.lookup(name)
    if rec is not None:
        say(f"{name}: done in an earlier run with these settings ({store.path(name)}); nothing to do")
        return store.run(name, fn, result_type), False
    if why.startswith("settings changed"):
        old, _ = StageStore(run.root).lookup(name)
        why = _changed((old or {}).get("fingerprint"), store.fingerprint)
    if why != "not run yet":
        say(f"{name}: running again ({why})")
    return store.run(name, fn, result_type), True


def trainable_model(policy: str) -> str | None:
    """What the trainer loads for a run's policy spec: a registered model for its name and for
    ``llamacpp:NAME`` (the same weights; ``smollm2``, say), ``MODEL`` for ``hf:MODEL``; ``None`` for a policy
    with no transformers weights here."""
    from trace_gym.policies.model_registry import model_spec

    kind, _, rest = policy.partition(":")
    if not rest and model_spec(kind) is not None:
        return kind
    if kind == "llamacpp" and model_spec(rest.partition("@")[0]) is not None:
        return rest.partition("@")[0]
    if kind == "hf" and rest:
        return rest
    return None


def generation(run: Any, args: argparse.Namespace | None = None) -> dict[str, Any]:
    """The run's generation options (``run.json``), each overridden by the same option given on this command."""
    doc = run.settings() or {}
    out = {k: v for k, v in (doc.get("generation") or {}).items() if k in GENERATION and v is not None}
    for key in GENERATION:
        value = getattr(args, key, None) if args is not None else None
        if value not in (None, False):
            out[key] = value
    return out


def use_run_specs(run: Any) -> list[str]:
    """Register the run's synthesized specs (``DIR/specs``) in this process and list that folder in
    ``TRACE_GYM_ENVS_DIR``, so processes this one starts find them too; their env ids in order."""
    from trace_gym.capabilities.entries import spec_files
    from trace_gym.synthesis.register import register_spec_files_once

    folder = run.specs.resolve()
    if not folder.is_dir():
        return []
    dirs = [d for d in os.environ.get("TRACE_GYM_ENVS_DIR", "").split(os.pathsep) if d]
    if str(folder) not in dirs:
        os.environ["TRACE_GYM_ENVS_DIR"] = os.pathsep.join([*dirs, str(folder)])
    paths = [p for p in spec_files() if p.resolve().parent == folder]
    return register_spec_files_once(paths)


def loading_model(policy: str, load: Callable[[], Any]) -> Any:
    """``load()`` (a policy or model of the run's ``policy`` spec), its failures as one :class:`CommandError` line."""
    from trace_gym.cli import CommandError
    from trace_gym.policies.base import PolicyError

    try:
        return load()
    except (PolicyError, ValueError, OSError) as exc:
        raise CommandError(f"cannot load the run's model {policy}: {exc}") from None

