"""The whole TRACE loop on a domain trace-gym has never heard of: the example bookshop.

    python examples/byo_domain/run_loop.py --model tiny --out runs/byo_domain      # plumbing, about a minute on CPU
    python examples/byo_domain/run_loop.py --model smollm2 --out runs/byo_smollm2  # the real small model

The bookshop (``bookshop_domain.py``) is registered the way any user registers a domain —
``TRACE_GYM_DOMAINS=bookshop=bookshop_domain:make_domain`` with this folder importable, and
its specs (``specs/``) through ``TRACE_GYM_ENVS_DIR`` — set below before trace-gym is
imported.  Then every stage is the ordinary command line, in this process:

1. ``rollout``  the model on both bookshop capability envs (train-split seeds);
2. ``analyze``  label the trajectories (offline labeler, general taxonomy) and select capabilities;
3. ``synthesize --domain bookshop``  one env per selected capability, from the domain's own specs
   (the domain's ``capabilities()`` names them); when the analysis selects none of the
   domain's capabilities, all of them are synthesized (said on the console);
4. ``calibrate``  the model on each synthesized env;
5. ``sft`` (and ``train`` with ``--grpo-steps``)  a LoRA adapter on the synthesized envs;
6. ``eval``  base model against the adapter on the first synthesized env's held-out tasks;
7. ``card``  the adapter's report card over every bookshop capability env.

Everything lands under ``--out``; ``summary.json`` holds the numbers.  Rerunning resumes the
stages that keep their episodes (rollouts, evaluation).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _register(out: Path) -> None:
    """The two registration variables, before ``import trace_gym`` (spec folders are read at import)."""
    sys.path.insert(0, str(HERE))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p)
    items = [i for i in os.environ.get("TRACE_GYM_DOMAINS", "").split(",") if i.strip() and not i.startswith("bookshop=")]
    os.environ["TRACE_GYM_DOMAINS"] = ",".join([*items, "bookshop=bookshop_domain:make_domain"])
    dirs = [d for d in os.environ.get("TRACE_GYM_ENVS_DIR", "").split(os.pathsep) if d]
    for d in (str(HERE / "specs"), str(out / "envs")):
        if d not in dirs:
            dirs.append(d)
    os.environ["TRACE_GYM_ENVS_DIR"] = os.pathsep.join(dirs)


def _cli(*argv: str) -> None:
    from trace_gym.cli import main

    print("$ trace-gym " + " ".join(argv), flush=True)
    rc = main(list(argv))
    if rc != 0:
        raise SystemExit(f"trace-gym {argv[0]} failed (exit {rc})")


def _model(name: str, out: Path) -> tuple[str, str]:
    """(policy spec, what the trainer and eval load) for ``tiny`` or ``smollm2``."""
    if name == "smollm2":
        return "smollm2", "smollm2"
    folder = out / "models" / "tiny"
    if not (folder / "config.json").exists():
        import torch

        from trace_gym.policies.hf import tiny_test_model

        torch.manual_seed(0)
        model, tok = tiny_test_model(0)
        model.save_pretrained(str(folder))
        tok.save_pretrained(str(folder))
    return f"hf:{folder}", str(folder)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=["tiny", "smollm2"], default="tiny")
    ap.add_argument("--out", default="runs/byo_domain")
    ap.add_argument("--rollouts", type=int, default=None, help="train seeds per bookshop env (default: 3 tiny, 16 smollm2)")
    ap.add_argument("--eval-tasks", type=int, default=None, help="held-out tasks per env (default: 2 tiny, 16 smollm2)")
    ap.add_argument("--sft-steps", type=int, default=None, help="SFT optimizer steps (default: 2 tiny, 24 smollm2)")
    ap.add_argument("--grpo-steps", type=int, default=0, help="GRPO steps after the SFT warm start (default 0: none)")
    ap.add_argument("--max-new-tokens", type=int, default=None, help="tokens per action (default: 16 tiny, 160 smollm2)")
    args = ap.parse_args(argv)
    tiny = args.model == "tiny"
    out = Path(args.out).resolve()
    _register(out)
    if tiny:
        import torch

        torch.set_num_threads(1)  # random tiny weights: threads only fight each other
    n_roll = args.rollouts or (3 if tiny else 16)
    n_eval = args.eval_tasks or (2 if tiny else 16)
    sft_steps = args.sft_steps or (2 if tiny else 24)
    tokens = str(args.max_new_tokens or (16 if tiny else 160))
    steps = "10" if tiny else "16"  # within both specs' max_steps knob range (calibrate sets the knob)
    policy, model = _model(args.model, out)
    gen = ["--max-new-tokens", tokens, *([] if tiny else ["--temperature", "0.2"])]

    import trace_gym  # noqa: F401  (registers the bookshop specs found through TRACE_GYM_ENVS_DIR)
    from trace_gym.capabilities.domains import get_domain
    from trace_gym.capabilities.plugins import domain_capabilities
    from trace_gym.eval.card import capability_envs

    domain = get_domain("bookshop")  # builds and checks the plug-in: a broken one stops here, in one line
    envs = [e for e in capability_envs("bookshop") if not e.startswith("trace/syn-")]
    summary: dict = {"model": args.model, "envs": envs}

    # 1. rollouts
    trajs = out / "rollouts.jsonl"
    for env in envs:
        _cli("rollout", env, "--policy", policy, "--seeds", f"0-{n_roll - 1}", "--out", str(trajs), "--env-arg",
             f"max_steps={steps}", "--policy-seed", "0", *gen)
    # 2. analysis
    _cli("analyze", str(trajs), "--out", str(out / "analysis"))
    doc = json.loads((out / "analysis" / "capabilities.json").read_text(encoding="utf-8"))
    mine = [c.name for c in domain_capabilities(domain)]
    chosen = [c for c in doc["selected"] if c in mine]
    if not chosen:
        print(f"the analysis selected none of the bookshop's capabilities {mine} (selected: {doc['selected']}); "
              "synthesizing all of them")
        chosen = mine
    summary["analysis"] = {"selected": doc["selected"], "synthesized_for": chosen}
    # 3. synthesis
    _cli("synthesize", str(out / "analysis" / "capabilities.json"), "--domain", "bookshop", "--out", str(out / "envs"),
         "--only", ",".join(chosen))
    syn = json.loads((out / "envs" / "_synthesis.json").read_text(encoding="utf-8"))
    new_envs = [f"trace/{o['spec_id']}-v0" for o in syn["outcomes"] if o["path"]]
    summary["synthesis"] = {o["capability"]: o["spec_id"] for o in syn["outcomes"]}
    # 4. calibration
    summary["calibration"] = {}
    for env in new_envs:
        report = out / "calibration" / f"{env.split('/')[-1]}.json"
        _cli("calibrate", env, "--policy", policy, "--seeds", "2", "--samples", "2", "--difficulty", f"max_steps={steps}",
             "--json-out", str(report), "--no-progress", *gen)
        summary["calibration"][env] = json.loads(report.read_text(encoding="utf-8"))["mean_reward"]
    # 5. training: an SFT warm start on the synthesized envs' reference episodes (then GRPO when asked)
    adapter = out / "adapters" / "bookshop"
    _cli("sft", "--sft-envs", ",".join(new_envs), "--model", model, "--out", str(adapter), "--sft-steps", str(sft_steps),
         "--sft-seeds", "2" if tiny else "32", "--max-new-tokens", tokens,
         *(["--lora-r", "4", "--cpu-threads", "1", "--set", "gradient_checkpointing=false", "--sft-prefix-grad", "detached"]
           if tiny else []))
    if args.grpo_steps:
        _cli("train", "--env", new_envs[0], "--model", model, "--init-adapter", str(adapter), "--out",
             str(out / "adapters" / "bookshop-grpo"), "--steps", str(args.grpo_steps), "--num-generations", "2",
             "--max-new-tokens", tokens, "--set", f"max_turns={steps}")
    # 6. evaluation: base against the adapter on held-out tasks
    _cli("eval", "--env", new_envs[0], "--policy", "base", "--policy", "adapter:bookshop", "--model", model,
         "--adapters", str(out / "adapters"), "--trials", "1", "--limit", str(n_eval), "--out", str(out / "eval"),
         "--env-kwargs", json.dumps({"max_steps": int(steps)}), "--batch-size", "2", *gen)
    comparison = json.loads((out / "eval" / "comparison.json").read_text(encoding="utf-8"))
    summary["eval"] = {r["spec"]: r["mean_reward"] for r in comparison["reports"]}
    # 7. the adapter's report card over every bookshop capability env
    _cli("card", "--policy", "adapter:bookshop", "--domain", "bookshop", "--model", model, "--adapters",
         str(out / "adapters"), "--episodes", str(n_eval), "--json-out", str(out / "card.json"), "--batch-size", "2", *gen)
    card = json.loads((out / "card.json").read_text(encoding="utf-8"))
    summary["card"] = {r["env_id"]: {"mean": r["mean"], "perfect": r["perfect"], "episodes": r["episodes"],
                                     "floor": r["floor"]} for r in card["rows"]}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
