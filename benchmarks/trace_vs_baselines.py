"""TRACE vs GRPO-on-target vs GEPA at an equal rollout budget.

Runs :func:`trace_gym.compare.pipeline.run_compare` (or ``run_scaling`` with
``--budgets``) with a preset and prints the table.  Every stage is resumable: rerun
the same command after an interruption and it continues.  ``--pool DIR DIR`` reports
finished runs on disjoint held-out tasks (a run and its ``--swap``) as one evaluation over
all their tasks (:mod:`trace_gym.compare.pool`).

Presets
-------
``smoke``  — the tiny random-weight model on τ²-bench mock, B = 4 (plumbing only, minutes).
``cpu``    — SmolLM2-135M-Instruct on CPU, the smallest budget where every method does
             something: B = 6, 4 train / 2 held-out tasks, K = 1, 4 env steps, 64 new
             tokens per turn, 2 rollouts per GRPO group, one capability adapter (add
             ``--survey``-style domains with ``survey_domains`` for the base survey).
             Expect scores near 0 for a 135M model.
``smoke-toolsandbox`` — the tiny model on ToolSandbox (``trace/toolsandbox-v0``), B = 8:
             plumbing of every method on held-out scenarios, graded per category.
``cpu-toolsandbox`` — SmolLM2-135M-Instruct on ToolSandbox on CPU: 32 held-out scenarios of the
             seeded, category-stratified fold ``test`` (= ``fold_b``; ``--swap`` learns on it and
             evaluates on ``fold_a``), spread over the categories, one trial each; a success for
             TRACE's analysis and router at milestone similarity ≥ 0.7; B = 168 rollouts per
             method.  TRACE: the base model on 24 train scenarios, then up to three capability
             envs, tuned toward the paper's 20–60% band (one round), whose adapters are
             SFT-only — 24 of their env's own reference episodes each (every fourth with a
             recovered tool error), with the 18 episodes of the shared format warm start and the
             base model's own successful episodes among its 24 base rollouts (reward ≥ 0.7, its
             refusals and closings included; ``cap_rehearse_base``) rehearsed beside them (not
             charged again), 30 detached-prompt steps, no GRPO (at CPU budgets GRPO
             after such a warm start lowered the score, ``learning_cpu.py``), said in its note — and
             a router whose index holds 5 reference episodes of each adapter's env (its cases in
             turn) and the target's failed train episodes the analysis labelled, and which hands
             a conversation to an adapter only when it offers every tool of that adapter's nearest
             example (rule ``cover``; ``--router-rule vote`` for the similarity vote; routing learned from
             outcomes is an option, off here: ``--router-outcomes N`` also plays each adapter on the first N
             of the 24 base-rollout scenarios, N × adapters rollouts of the budget, and the nearest such
             scenario routes to whichever of base and the adapters scored best on it).  The capability envs draw a
             quarter of their requests with a tool they need not offered (``withheld_weight``
             0.33), to be refused, as ToolSandbox's insufficient-information scenarios are.  Base rollouts, calibration,
             tuning and demonstrations are all charged to TRACE's budget.  Every method starts
             from the same format warm start.  Reports mean similarity and perfect count overall
             and per category (and ``answerable``: the
             scenarios without insufficient information, where a refusal scores 0) with
             bootstrap CIs, paired differences against the base model per group, the refusal
             floor beside them and the budget ledger (at most two hours on an idle 2-core
             machine).  Two reference rows beside the methods: ``joint``, one adapter SFT'd on
             the union of the adapters' demonstrations (3 × 30 steps), no routing (an ablation; its
             extra cost is in the ledger), and ``oracle``, per scenario the better of base and each
             adapter forced on it (an upper reference, not a method); they add one SFT of 90
             steps and three evaluations of the held-out scenarios (the joint adapter, the two
             adapters not already evaluated as ``single``) to the time above.
``gpu``    — the configuration for one GPU (see below).

GPU configuration (one H100/H200, 80+ GiB)
------------------------------------------
* model: ``Qwen/Qwen2.5-7B-Instruct`` (or any chat model with tool calling; SmolLM2
  is too weak to score on τ²-bench), bf16, LoRA r = 16, α = 32 on all linear layers;
* generation: GRPO samples with vLLM in colocate mode (``TrainConfig.backend = "auto"``
  picks it when the ``vllm`` package and CUDA are present) at temperature 1.0;
  evaluation, base rollouts, calibration and GEPA use transformers ``generate`` on the
  GPU with batched episodes (``batch_size``) at temperature 0.7;
* target: ``trace/tau2-retail-v0`` (74 train / 40 test tasks), env ``max_steps = 30``;
* budgets: B ∈ {256, 512, 1024} rollouts per method (``--budgets 256,512,1024``);
  GRPO groups of G = 8, 2 groups per step, ``max_resamples = 1`` (worst case 32
  rollouts per step); TRACE: a quarter of B for base rollouts, 2×2 calibration
  episodes and 2 routing episodes per capability, the rest split over ≤ 3 adapters;
  GEPA: minibatch 3, 8 validation tasks, reflection by the base model (or a
  stronger one with ``--reflection openai:URL#MODEL``);
* evaluation: all 40 test tasks, K = 4 trials (pass^1 … pass^4, bootstrap 95% CI).

Command::

    python benchmarks/trace_vs_baselines.py --preset gpu --out runs/compare-gpu
    # or: trace-gym compare --target trace/tau2-retail-v0 --model Qwen/Qwen2.5-7B-Instruct \\
    #       --budgets 256,512,1024 --trials 4 --env max_steps=30 --train num_generations=8 \\
    #       --train seeds_per_step=2 --train max_resamples=1 --train max_new_tokens_per_turn=512 \\
    #       --train max_completion_length=8192 --train dtype=bfloat16 --gen max_new_tokens=512 \\
    #       --survey retail,airline,telecom

``--seed N`` is the one seed of the whole pipeline (warm start, base rollouts, analysis,
synthesis, calibration, training, routing, every method's sampling and the evaluation's trial
seeds, ``N + 1000``); a run at another seed goes to ``<out>-seed<N>``.

Outputs: ``compare.json`` (config, seeds, splits, budget ledgers, per-task results),
``compare.md`` (table), ``compare.png`` (pass^1 per method with CIs); with budgets,
``scaling.json``/``scaling.md``/``scaling.png`` (score vs rollouts per method).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PRESETS: dict[str, dict[str, Any]] = {
    "smoke": dict(
        target="trace/tau2-mock-v0", model="tiny", budget=4, trials=1, n_train_tasks=3, n_test_tasks=2,
        env_kwargs={"max_steps": 3}, gen={"max_new_tokens": 6, "temperature": 1.0},
        train={"num_generations": 2, "seeds_per_step": 1, "max_resamples": 0, "max_new_tokens_per_turn": 6,
               "max_completion_length": 48, "lora_r": 4, "lora_alpha": 8},
        max_train_steps=1, gepa_val=2, gepa_minibatch=1, base_tasks=2),
    "cpu": dict(
        target="trace/tau2-retail-v0", model="smollm2", budget=6, trials=1, n_train_tasks=4, n_test_tasks=2,
        env_kwargs={"max_steps": 4}, cap_env_kwargs={"max_steps": 4},
        gen={"max_new_tokens": 64, "temperature": 0.7},
        train={"num_generations": 2, "seeds_per_step": 1, "max_resamples": 0, "max_new_tokens_per_turn": 64,
               "max_completion_length": 512, "lora_r": 8, "lora_alpha": 16, "learning_rate": 5e-5},
        gepa_val=2, gepa_minibatch=1, base_tasks=1, calib_seeds=1, calib_samples=1, routing_seeds=1,
        max_capabilities=1),
    "smoke-toolsandbox": dict(
        target="trace/toolsandbox-v0", model="tiny", budget=8, trials=1, n_train_tasks=8, n_test_tasks=3, success=0.7,
        env_kwargs={"max_steps": 4}, cap_env_kwargs={"max_steps": 4}, gen={"max_new_tokens": 6, "temperature": 1.0},
        train={"num_generations": 2, "seeds_per_step": 1, "max_resamples": 0, "max_new_tokens_per_turn": 6,
               "max_completion_length": 48, "lora_r": 4, "lora_alpha": 8, "sft_max_steps": 1, "sft_batch_size": 1},
        max_train_steps=1, gepa_val=2, gepa_minibatch=1, base_tasks=4, calib_seeds=1, calib_samples=1,
        routing_seeds=1, min_capabilities=1, max_capabilities=1, cap_warm_demos=1),
    "cpu-toolsandbox": dict(
        target="trace/toolsandbox-v0", model="smollm2", budget=168, trials=1, n_train_tasks=None, n_test_tasks=32,
        success=0.7, env_kwargs={"max_steps": 12}, cap_env_kwargs={"max_steps": 8},
        gen={"max_new_tokens": 96, "temperature": 0.7, "batch_size": 8},
        train={"num_generations": 4, "seeds_per_step": 1, "max_resamples": 0, "max_new_tokens_per_turn": 64,
               "max_completion_length": 512, "max_turns": 4, "lora_r": 8, "lora_alpha": 16, "learning_rate": 5e-5,
               "sft_max_steps": 30, "sft_learning_rate": 4e-4, "sft_prefix_grad": "detached", "sft_recover_every": 4,
               "gradient_checkpointing": False},
        gepa_val=4, gepa_minibatch=2, base_tasks=24, base_samples=1, calib_seeds=2, calib_samples=2, routing_seeds=5,
        band=[0.2, 0.6], tune_rounds=1, max_capabilities=3, batch_size=8, cap_warm_demos=24, trace_grpo_steps=0,
        cap_rehearsal=True, cap_rehearse_base=True, cap_knobs={"withheld_weight": 0.5}, router_rule="needs",
        adapter_choice="select", select_tasks=16, need_examples=24,
        methods=["base", "grpo", "gepa", "trace", "classifier", "single", "joint", "oracle", "ideal"]),
    "gpu": dict(
        target="trace/tau2-retail-v0", model="Qwen/Qwen2.5-7B-Instruct", budget=512, trials=4,
        env_kwargs={"max_steps": 30}, cap_env_kwargs={"max_steps": 30},
        gen={"max_new_tokens": 512, "temperature": 0.7, "batch_size": 16},
        train={"num_generations": 8, "seeds_per_step": 2, "max_resamples": 1, "max_new_tokens_per_turn": 512,
               "max_completion_length": 8192, "lora_r": 16, "lora_alpha": 32, "learning_rate": 1e-5,
               "dtype": "bfloat16"},
        gepa_val=8, gepa_minibatch=3, calib_seeds=2, calib_samples=2, routing_seeds=2, max_capabilities=3,
        batch_size=8, survey_domains=["retail", "airline", "telecom"], survey_tasks=10),
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line's flags."""
    from trace_gym.route.retrieval import RULES

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", choices=sorted(PRESETS), default="smoke")
    ap.add_argument("--out", default=None, help="output folder (default runs/compare-<preset>)")
    ap.add_argument("--budget", type=int, default=None)
    ap.add_argument("--budgets", default=None, help="scaling mode, e.g. 8,16,32")
    ap.add_argument("--model", default=None)
    ap.add_argument("--target", default=None)
    ap.add_argument("--methods", default=None)
    ap.add_argument("--seed", type=int, default=None,
                    help="the one seed of the whole pipeline (default 0; another seed writes to <out>-seed<N>)")
    ap.add_argument("--router-rule", default=None, choices=RULES,
                    help="TRACE's retrieval routing rule (a stored run reruns from routing on)")
    ap.add_argument("--router-outcomes", type=int, default=None, metavar="N",
                    help="TRACE's routing also learns from outcomes: each adapter plays the first N base-rollout "
                         "scenarios (charged), the best scoring source labels each (a stored run reruns from routing on)")
    ap.add_argument("--adapter-choice", default=None, choices=("per-capability", "joint", "select"),
                    help="TRACE's adapters: per capability, one joint adapter, or whichever does better on learning tasks "
                         "(select; needs --router-rule needs; a stored run reruns from training on)")
    ap.add_argument("--rehearse-peers", action=argparse.BooleanOptionalAction, default=None,
                    help="each TRACE adapter's SFT also rehearses the other adapters' demonstrations, for "
                         "sft_max_steps × the envs it learns from (a stored run reruns from training on)")
    ap.add_argument("--swap", action="store_true",
                    help="learn on the target's test split and evaluate on its train split (ToolSandbox: fold_b, fold_a)")
    ap.add_argument("--pool", nargs="+", default=None, metavar="DIR",
                    help="only pool finished runs on disjoint held-out tasks (a run and its --swap) into one report "
                         "(default --out runs/compare-<preset>-pooled)")
    return ap.parse_args(argv)


def config_of(args: argparse.Namespace) -> Any:
    """The validated :class:`~trace_gym.compare.pipeline.CompareConfig` of the preset and the flags."""
    from trace_gym.compare.pipeline import CompareConfig

    fields = dict(PRESETS[args.preset])
    fields["out"] = args.out or f"runs/compare-{args.preset}"
    for key in ("budget", "model", "target"):
        if getattr(args, key) is not None:
            fields[key] = getattr(args, key)
    if args.router_rule:
        fields["router_rule"] = args.router_rule
    if args.router_outcomes is not None:
        fields["router_outcomes"] = args.router_outcomes
    if args.adapter_choice is not None:
        fields["adapter_choice"] = args.adapter_choice
    if args.rehearse_peers is not None:
        fields["cap_rehearse_peers"] = args.rehearse_peers
    if args.methods:
        fields["methods"] = args.methods.split(",")
    if args.swap:
        fields["train_split"], fields["test_split"] = "test", "train"
        fields["out"] = args.out or f"runs/compare-{args.preset}-swapped"
    if args.seed is not None:
        fields["seed"] = args.seed
        if args.seed and not args.out:
            fields["out"] += f"-seed{args.seed}"
    return CompareConfig(**fields).validate()


def main(argv: list[str] | None = None) -> int:
    from rich.console import Console

    from trace_gym.compare.pipeline import run_compare, run_scaling
    from trace_gym.compare.report import rich_paired_table, rich_scores_table, rich_table
    from trace_gym.progress import reporting

    args = parse_args(argv)
    if args.pool:
        from trace_gym.compare.pool import write_pooled

        doc = write_pooled(args.pool, args.out or f"runs/compare-{args.preset}-pooled")
        print(doc["markdown"])
        return 0

    cfg = config_of(args)
    console = Console()
    t0 = time.perf_counter()
    if args.budgets:
        with reporting(Console(stderr=True)):  # a progress line per stage that plays episodes or trains
            doc = run_scaling(cfg, [int(b) for b in args.budgets.split(",")], log=lambda m: console.print(f"[dim]{m}[/dim]"))
        for run in doc["runs"]:
            console.print(rich_table({"target": doc["target"], "budget": run["budget"], "methods": run["methods"]}))
    else:
        with reporting(Console(stderr=True)):
            doc = run_compare(cfg, log=lambda m: console.print(f"[dim]{m}[/dim]"))
        console.print(rich_table(doc))
        per_group = rich_scores_table(doc)
        if per_group is not None:
            console.print(per_group)
        paired = rich_paired_table(doc)
        if paired is not None:
            console.print(paired)
    console.print(f"wall time {time.perf_counter() - t0:.0f} s; outputs in {cfg.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
