"""``trace-gym demo``: the full TRACE loop offline (:mod:`trace_gym.demo`, a front-end over :mod:`trace_gym.pipeline`)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run the whole TRACE loop offline on CPU (rollouts → analysis → envs → adapters → routing → eval)")
    p.add_argument("--out", default="runs/demo", help="output folder (default runs/demo); rerunning resumes")
    p.add_argument("--target", default="toolsandbox", metavar="TARGET",
                   help="toolsandbox (default: the model's own successes and failures drive the loop), "
                        "tau2-retail (a flawed scripted agent supplies the successes and failures a small model "
                        "cannot produce on τ²-bench's ~5k-token prompts) or a full env id")
    p.add_argument("--domain", default="retail", choices=["retail"], help="τ²-bench domain of a τ² target (default retail)")
    p.add_argument("--fast", action="store_true", help="smaller sizes (about half the time)")
    from trace_gym.policies.model_registry import model_names

    p.add_argument("--model", default="smollm2", choices=model_names(),
                   help="smollm2 (SmolLM2-135M-Instruct) or tiny (random weights, plumbing check in about a minute)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--warm-start", action=argparse.BooleanOptionalAction, default=None,
                   help="first fine-tune the model on reference episodes of the target domain's capability envs "
                        "(output format only; merged into the weights every stage, the base model included, then uses). "
                        "Default: off")
    p.add_argument("--engine", default="auto", choices=["auto", "transformers", "llamacpp"],
                   help="what acts (rollouts, calibration, evaluation; training is always transformers): auto "
                        "(default) is llama.cpp where llama-cpp-python is installed, else transformers")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # offline loads are quick; the demo's own lines say more
    from rich.console import Console

    from trace_gym.data import DataDirError
    from trace_gym.demo import DemoConfig, run_demo
    from trace_gym.pipeline.warm import WarmStartMismatch
    from trace_gym.policies.hf import ModelUnavailableError

    console = Console()
    try:
        cfg = DemoConfig.for_run(out=args.out, domain=args.domain, model=args.model, fast=args.fast, seed=args.seed,
                                 target=args.target, warm_start=args.warm_start, engine=args.engine)
    except ValueError as exc:
        console.print(f"[red]error:[/red] {exc}")
        return 2
    from trace_gym.cli import removing_empty_output

    try:
        with removing_empty_output(cfg.out):  # a run that fails before writing anything leaves no folder
            run_demo(cfg, console)
    except (DataDirError, ModelUnavailableError, WarmStartMismatch) as exc:
        console.print(f"[red]error:[/red] {exc}")
        return 2
    return 0
