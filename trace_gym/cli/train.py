"""``trace-gym train``: GRPO + LoRA on one environment; ``trace-gym sft``: a supervised warm start.

    trace-gym train --env trace/cap-refund-policy-v0 --model smollm2 --out adapters/refund \\
        [--config train.yaml] [--set num_generations=8 --set lora_r=16 ...] [--resume]
    trace-gym train ... --warm-start [--sft-envs trace/cap-ts-state-dependency-v0,...] [--sft-seeds 32]
    trace-gym sft --sft-envs trace/cap-ts-state-dependency-v0,... --model smollm2 --out adapters/format \\
        [--save-steps 4] [--resume]
    trace-gym sft --run DIR [--sft-seeds 32 --sft-steps 24] [--rehearse-base]   # one adapter per capability
    trace-gym train --run DIR [--steps 8] [--warm-start]                          # of a run (see below)

``--warm-start`` first fine-tunes the LoRA adapter on reference episodes (SFT, into
``OUT/warm_start/``), then runs GRPO from it; ``trace-gym sft`` runs only the warm start
(``--init-adapter`` then starts a GRPO run from it).  Both checkpoint every ``--save-steps``
steps under ``OUT/checkpoints`` and continue exactly from the newest one with ``--resume``.

Settings are taken, in order, from the defaults (TRACE's recipe), ``--config``
(YAML or JSON), the dedicated flags, then ``--set name=value`` (any field of
:class:`trace_gym.train.TrainConfig`).  ``--print-config`` shows the result and exits.
``--report-to tensorboard`` (or ``wandb``) also sends every logged step there (TRL's reporting).

reads:  --env (a registered env id) and --model; with --run DIR the run's calibrated capability envs
        (DIR/stages/calibration.json, DIR/specs/) and its model (DIR/run.json; --model overrides it)
writes: OUT/ the adapter (adapter_config.json, adapter_model.safetensors), train_config.json, metrics.jsonl
        (sft: sft_metrics.jsonl, warm_start.json), learning_curve.png, checkpoints/, tensorboard/ with
        --report-to tensorboard; OUT/../manifest.json (one entry per adapter)
        --run DIR: one adapter per capability env into DIR/adapters/<capability>/ (an interrupted one
        continues from its newest checkpoint, a finished one is kept) and DIR/stages/training.json
next:   trace-gym route --run DIR
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from typing import Any

__all__ = ["register", "run", "build_config"]

# Dedicated flags: (flag, config field, type, help).
_FLAGS: list[tuple[str, str, Any, str]] = [
    ("--steps", "max_steps", int, "optimizer steps"),
    ("--num-generations", "num_generations", int, "rollouts per seed (GRPO group size G)"),
    ("--seeds-per-step", "seeds_per_step", int, "groups per optimizer step"),
    ("--train-seeds", "num_train_seeds", int, "how many env seeds to train on"),
    ("--seed-start", "train_seed_start", int, "first training seed"),
    ("--seed", "seed", int, "run seed (LoRA init, sampling, hint draws)"),
    ("--lr", "learning_rate", float, "learning rate"),
    ("--lora-r", "lora_r", int, "LoRA rank"),
    ("--lora-alpha", "lora_alpha", int, "LoRA alpha"),
    ("--lora-targets", "lora_target_modules", str, "LoRA target modules: all-linear or a comma list"),
    ("--hint-fraction", "hint_fraction", float, "share of rollouts shown the env's hint"),
    ("--max-new-tokens", "max_new_tokens_per_turn", int, "tokens per agent turn"),
    ("--max-completion-length", "max_completion_length", int, "agent+env tokens per episode after the prompt"),
    ("--save-steps", "save_steps", int, "checkpoint every N steps (0: never)"),
    ("--backend", "backend", str, "auto | transformers | vllm | llamacpp (GRPO samples in llama.cpp; needs llama-cpp-python)"),
    ("--sampler-gguf", "sampler_gguf", str, "with --backend llamacpp: the trained model's GGUF (default: smollm2's)"),
    ("--device", "device", str, "auto | cpu | cuda"),
    ("--cpu-threads", "cpu_threads", int, "torch threads on CPU"),
    ("--tool-format", "tool_format", str, "auto | hermes | smollm2: how tool calls are written in prompts (auto: the model's own)"),
    ("--init-adapter", "init_adapter", str, "start from this LoRA adapter folder (e.g. one from `trace-gym sft`)"),
    ("--sft-seeds", "sft_seeds_per_env", int, "warm start: train-split tasks per demonstration env"),
    ("--sft-steps", "sft_max_steps", int, "warm start: optimizer steps (0: --sft-epochs decide)"),
    ("--sft-epochs", "sft_epochs", float, "warm start: passes over the demonstrations"),
    ("--sft-lr", "sft_learning_rate", float, "warm start: learning rate"),
    ("--sft-prefix-grad", "sft_prefix_grad", str,
     "warm start: exact (default) | detached: run each demonstration's prompt without gradient (faster, approximate)"),
    ("--sft-recover-every", "sft_recover_every", int,
     "warm start: every Nth demonstration tries the reference's last call first and recovers from its error (0: none)"),
    ("--prefix-grad", "prefix_grad", str, "exact (default) | detached: train the shared prompt prefix, or not (faster, approximate)"),
    ("--lm-head", "lm_head", str,
     "fused (default: TRL's chunked LM head) | full: the loss's log-probs from one float32 projection (faster on a CPU, more memory)"),
    ("--report-to", "report_to", str,
     "none (default) | tensorboard | wandb: where TRL also sends every logged step (metrics.jsonl is always written)"),
]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("train", help="4. train a LoRA adapter with GRPO on an environment (or per capability of a run)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_arguments(p)
    p.add_argument("--warm-start", action="store_true",
                   help="SFT the adapter on reference episodes (--sft-envs, default --env) before GRPO")
    p.set_defaults(func=run)
    s = subparsers.add_parser("sft", help="4. train a LoRA adapter by SFT on reference episodes (or per capability of a run)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_arguments(s)
    s.set_defaults(func=run_sft)


def _add_arguments(p: Any) -> None:
    from trace_gym.cli.runs import RUN_HELP

    p.add_argument("--env", dest="env_id", help="registered env id (see `trace-gym envs`)")
    p.add_argument("--model", help="tiny | smollm2 | a Hugging Face model folder or id (with --run: the run's model)")
    p.add_argument("--out", help="adapter folder, e.g. adapters/NAME (manifest.json goes next to it)")
    p.add_argument("--run", metavar="DIR", help=RUN_HELP)
    p.add_argument("--rehearse-base", action="store_true",
                   help="with --run: each adapter's SFT also rehearses the model's own successful episodes of the run's "
                        "rollouts (so it keeps what the model already does well, such as refusing)")
    p.add_argument("--config", help="YAML or JSON file with TrainConfig fields")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="NAME=VALUE", help="override any config field")
    for flag, fieldname, typ, help_text in _FLAGS:
        p.add_argument(flag, dest=f"flag_{fieldname}", type=typ, default=None, help=help_text)
    p.add_argument("--resume", action="store_true", help="continue from the newest checkpoint under OUT/checkpoints")
    p.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help="import a module first (e.g. one that registers your own env ids)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--no-shared-prefix", action="store_true",
                   help="compute each group's shared prompt prefix per rollout (slower; the loss is the same)")
    p.add_argument("--print-config", action="store_true", help="print the resolved config as JSON and exit")
    p.add_argument("--json", action="store_true", help="print the run summary as JSON")
    p.add_argument("--sft-envs", default=None, metavar="ID,ID",
                   help="comma list of env ids whose reference episodes are the warm start's demonstrations")


def build_config(args: argparse.Namespace) -> Any:
    from trace_gym.train.config import TrainConfig, load_config

    cfg = load_config(args.config) if args.config else TrainConfig()
    changes: dict[str, Any] = {}
    for name in ("env_id", "model", "out"):
        if getattr(args, name, None):
            changes[name] = getattr(args, name)
    for _, fieldname, _, _ in _FLAGS:
        value = getattr(args, f"flag_{fieldname}", None)
        if value is not None:
            changes[fieldname] = value
    if getattr(args, "no_progress", False):
        changes["progress"] = False
    if getattr(args, "no_shared_prefix", False):
        changes["shared_prefix"] = False
    if getattr(args, "sft_envs", None):
        changes["sft_envs"] = [e.strip() for e in args.sft_envs.split(",") if e.strip()]
    cfg = cfg.with_overrides(**changes)
    for assignment in args.overrides:
        cfg = cfg.set_from_string(assignment)
    return cfg.validate()


def _prepare(args: argparse.Namespace) -> Any:
    """The resolved config, or an exit code (imports failed, --print-config done)."""
    from trace_gym.cli import UsageError, input_file
    from trace_gym.train.config import ConfigError

    if args.config:
        input_file(args.config, "config file")
    for mod in args.imports:
        try:
            importlib.import_module(mod)
        except ImportError as exc:
            print(f"error: --import {mod}: {exc}", file=sys.stderr)
            return 2
    try:
        cfg = build_config(args)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    if args.print_config:
        print(json.dumps(cfg.to_dict(), indent=2))
        return 0
    return cfg


def _problem(missing: list[str], env_ids: list[str]) -> str | None:
    """The one line that says why a run cannot start (missing flags, unknown env ids), or None."""
    if missing:
        return f"missing {', '.join(missing)} (on the command line or in --config)"
    import gymnasium as gym

    import trace_gym  # noqa: F401

    for env_id in env_ids:
        try:
            gym.spec(env_id)
        except Exception as exc:  # gymnasium's own error names close matches
            return f"unknown env {env_id!r}: {exc}"
    return None


def run_sft(args: argparse.Namespace) -> int:
    from trace_gym.train.config import ConfigError

    cfg = _prepare(args)
    if isinstance(cfg, int):
        return cfg
    if args.run:
        return _train_in_folder(args, cfg, sft=True)
    _no_run_flags(args)
    missing = [flag for flag, value in (("--model", cfg.model), ("--out", cfg.out)) if not value]
    if not (cfg.sft_envs or cfg.env_id):
        missing.append("--sft-envs (or --env)")
    problem = _problem(missing, list(cfg.sft_envs) or [cfg.env_id])
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        from trace_gym.policies.prompting import ChatTemplateError
        from trace_gym.train.demos import NoReferenceError
        from trace_gym.train.sft import warm_start
    except ImportError as exc:
        print(f"error: training needs the train extra (pip install 'trace-gym[train]'): {exc}", file=sys.stderr)
        return 2
    from trace_gym.cli import removing_empty_output

    try:
        with removing_empty_output(cfg.out):
            result = warm_start(cfg, resume=args.resume)
    except (FileNotFoundError, ConfigError, NoReferenceError, ChatTemplateError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    rec = result.record
    summary = {"adapter": str(result.out), "demonstrations": result.demos, "per_env": rec["per_env"],
               "trained_tokens": rec["trained_tokens"], "steps": result.steps, "loss_before": rec["loss_before"],
               "loss_after": rec["loss_after"], "skipped": {k: len(v) for k, v in rec["skipped"].items()},
               "seconds": round(result.seconds, 1)}
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"adapter: {summary['adapter']}")
        print(f"demonstrations: {result.demos} {rec['per_env']}   trained tokens: {rec['trained_tokens']}   steps: {result.steps}")
        print(f"loss on demonstrations: {rec['loss_before']:.3f} -> {rec['loss_after']:.3f}   time: {summary['seconds']}s")
    return 0


def run(args: argparse.Namespace) -> int:
    from trace_gym.train.config import ConfigError

    cfg = _prepare(args)
    if isinstance(cfg, int):
        return cfg
    if args.run:
        return _train_in_folder(args, cfg, sft=False)
    _no_run_flags(args)
    missing = [flag for flag, value in (("--env", cfg.env_id), ("--model", cfg.model), ("--out", cfg.out)) if not value]
    warm = getattr(args, "warm_start", False)
    problem = _problem(missing, [cfg.env_id, *(cfg.sft_envs if warm else [])])
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        from trace_gym.policies.prompting import ChatTemplateError
        from trace_gym.train.demos import NoReferenceError
        from trace_gym.train.sft import train_with_warm_start
        from trace_gym.train.trainer import train
    except ImportError as exc:
        print(f"error: training needs the train extra (pip install 'trace-gym[train]'): {exc}", file=sys.stderr)
        return 2
    from trace_gym.cli import removing_empty_output

    try:
        with removing_empty_output(cfg.out):
            result = train_with_warm_start(cfg, resume=args.resume) if warm else train(cfg, resume=args.resume)
    except (FileNotFoundError, ConfigError, NoReferenceError, ChatTemplateError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    summary = {
        "adapter": str(result.out),
        "manifest": str(result.out.parent / "manifest.json") if cfg.manifest else None,
        "steps": result.steps,
        "rollouts_used": result.rollouts,
        "rollout_stats": result.rollout_stats,
        "constant_group_fraction": result.manifest_entry.get("constant_group_fraction"),
        "learned": result.manifest_entry.get("learned"),
        "final_reward": result.reward_curve[-1][1] if result.reward_curve else None,
        "metrics": str(result.metrics_path) if result.metrics_path else None,
        "learning_curve": str(result.plot_path) if result.plot_path else None,
        "seconds": round(result.seconds, 1),
    }
    if "warm_start" in result.manifest_entry:
        ws = result.manifest_entry["warm_start"]
        summary["warm_start"] = {k: ws.get(k) for k in ("path", "demonstrations", "per_env", "steps", "loss_before", "loss_after")}
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"adapter: {summary['adapter']}")
        print(f"steps: {result.steps}   env rollouts consumed: {result.rollouts} "
              f"(resampled groups {result.rollout_stats.get('resampled_groups', 0)}, dropped {result.rollout_stats.get('dropped_groups', 0)})")
        if summary["final_reward"] is not None:
            first = result.reward_curve[0][1]
            print(f"mean env reward: first step {first:.3f}, last step {summary['final_reward']:.3f}")
        if "warm_start" in summary:
            ws = summary["warm_start"]
            print(f"warm start: {ws['path']} ({ws['demonstrations']} demonstrations, {ws['steps']} steps, "
                  f"loss {ws['loss_before']:.3f} -> {ws['loss_after']:.3f})")
        print(f"metrics: {summary['metrics']}   curve: {summary['learning_curve']}   time: {summary['seconds']}s")
        if summary["learned"] is False:
            print(f"learned: NO (constant-reward groups: {summary['constant_group_fraction']:.0%}; the warning above says what to change)")
    return 0


# settings that change how a run reports, not what it trains: a run folder's adapters stay valid when they change
_HOW_IT_REPORTS = ("progress", "report_to", "cpu_threads", "logging_steps", "plot")


def _no_run_flags(args: argparse.Namespace) -> None:
    if args.rehearse_base:
        from trace_gym.cli import UsageError

        raise UsageError("--rehearse-base rehearses a run's own episodes: give --run DIR")


def _train_in_folder(args: argparse.Namespace, cfg: Any, *, sft: bool) -> int:
    """``sft|train --run DIR``: one adapter per calibrated capability env of the run (stage ``training``), through
    :func:`trace_gym.pipeline.train_capability`, as the pipeline trains them."""
    from rich.console import Console

    from trace_gym.cli import UsageError
    from trace_gym.cli.runs import need, open_run, refuse_with_run, run_stage, trainable_model, use_run_specs
    from trace_gym.pipeline import Calibration, Rehearsal, Rollouts, Training, adapter_name, train_capability
    from trace_gym.pipeline.stages import env_kwargs_for
    from trace_gym.pipeline.training import base_successes
    from trace_gym.progress import reporting
    from trace_gym.train.config import TrainConfig

    console = Console(stderr=True, soft_wrap=True)
    refuse_with_run(args, env=args.env_id, out=args.out, sft_envs=args.sft_envs, resume=args.resume,
                    init_adapter=cfg.init_adapter)
    run = open_run(args.run)
    calibration = need(run, "calibration", Calibration)
    use_run_specs(run)
    doc = run.settings()
    model = args.model or trainable_model(doc["policy"])
    if not model:
        raise UsageError(f"the run's policy {doc['policy']} has no weights here to train: give --model (a model "
                         "folder or hub id of the same model)")
    defaults = TrainConfig().to_dict()
    train = {k: v for k, v in cfg.to_dict().items() if v != defaults[k] and k not in ("env_id", "model", "out")}
    warm = sft or bool(getattr(args, "warm_start", False))
    steps = 0 if sft else cfg.max_steps
    rehearsal = None
    if args.rehearse_base:
        if not warm:
            raise UsageError("--rehearse-base rehearses in a supervised start: use `sft --run`, or `train --run "
                             "--warm-start`")
        rollouts = need(run, "rollouts", Rollouts)
        rehearsal = Rehearsal(episodes=tuple(base_successes(rollouts, run.target().threshold)))
    settings = {"kind": "sft" if sft else ("grpo+warm" if warm else "grpo"), "model": model,
                "train": {k: v for k, v in train.items() if k not in _HOW_IT_REPORTS}, "rehearse_base": bool(rehearsal)}
    after = ("calibration", "rollouts") if rehearsal is not None else ("calibration",)
    todo = [e for e in calibration.envs if e.get("train", True)]
    _refuse_other_adapters(run, settings, after, [adapter_name(e["capability"]) for e in todo])

    def train_all() -> Training:
        out = Training()
        for e in todo:
            a = train_capability(e, adapter_name(e["capability"]), run.adapters, model=model, seed=cfg.seed, train=train,
                                 steps=steps, env_kwargs=env_kwargs_for(e, {}), warm_demos=cfg.sft_seeds_per_env if warm else 0,
                                 rehearsal=rehearsal)
            (out.skipped if a.skipped else out.adapters).append(a)
        return out

    from trace_gym.cli import CommandError
    from trace_gym.policies.prompting import ChatTemplateError

    try:
        with reporting(console):
            res, _ = run_stage(run, "training", train_all, Training, settings=settings, after=after)
    except ChatTemplateError as exc:
        raise CommandError(str(exc)) from None
    for a in res.adapters:
        what = (f"SFT on {a.demonstrations} reference episodes of {a.env_id}"
                + (f" and {a.rehearsed} rehearsed" if a.rehearsed else "") if a.demonstrations else "")
        if a.steps:
            what += (", then " if what else "") + f"{a.steps} GRPO steps (reward {a.final_reward:.3f} at the end)"
        print(f"adapter {a.adapter}: {what} -> {a.path}")
    for a in res.skipped:
        print(f"no adapter for {a.capability}: {a.skipped}")
    if not res.adapters:
        return 1
    print(f"next: trace-gym route --run {args.run}")
    return 0


def _refuse_other_adapters(run: Any, settings: dict[str, Any], after: tuple[str, ...], names: list[str]) -> None:
    """A :class:`UsageError` when the stage must run again (its settings changed) over adapters an earlier run
    finished: they would be kept as they are, so say which to remove instead."""
    from trace_gym.adapters import read_manifest

    rec, why = run.store(settings, after).lookup("training")
    if rec is not None or why == "not run yet":
        return
    done = {a.get("name") for a in read_manifest(run.adapters / "manifest.json")["adapters"]}
    kept = [n for n in names if n in done and (run.adapters / n / "adapter_model.safetensors").exists()]
    if kept:
        from trace_gym.cli import UsageError

        raise UsageError(f"{run.root}: the adapters {', '.join(kept)} were trained with other settings or inputs; "
                         f"remove {', '.join(str(run.adapters / n) for n in kept)} to train them again")
