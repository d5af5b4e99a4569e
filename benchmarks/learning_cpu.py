"""Does GRPO+LoRA on CPU make SmolLM2-135M better at a capability, on held-out seeds?

    python benchmarks/learning_cpu.py [--env trace/cap-ts-location-dependency-v0] [--minutes 40] \\
        [--warm-start-envs auto] [--eval-seeds 32] [--samples 2] [--json OUT.json]

1. **Base**: evaluate SmolLM2 on held-out seeds (never trained on; ``--eval-seed-start`` on),
   ``--samples`` sampled episodes per seed, hint off, at the sampling settings training uses.
2. **Warm start** (format only): LoRA SFT on reference episodes of *other* envs
   (``--warm-start-envs``; ``auto`` = every other env of the same domain), so the model learns
   the call format and how an episode ends without seeing the target capability's solutions.
   Evaluated on the same seeds.
3. **GRPO**: continue that adapter with GRPO on the target env's training seeds for as many
   steps as fit in ``--minutes`` (or ``--steps``, whichever comes first), then evaluate.

Every evaluation uses the same sampling seeds.  Printed: a table of mean reward and
perfect-episode share per model, each with a 95% bootstrap CI over seeds, and paired
differences (GRPO - warm start, which is what GRPO learnt; GRPO - base) with their paired
bootstrap 95% CIs; the refusal floor (what replying "I can't do that" to every seed scores)
is measured and printed beside them.  ``--env say-word`` runs the built-in one-turn toy
("say the word X") instead, without a warm start.

The figures are what they are: if the paired CI includes 0, nothing detectable was learnt.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

from trace_gym.core import ToolEnv, ToolSet  # noqa: E402
from trace_gym.core.env import EpisodeOpening  # noqa: E402

WORDS = ["apple", "river", "stone", "cloud", "ember", "maple", "orbit", "tulip", "amber", "cedar", "delta", "frost"]


class SayWordEnv(ToolEnv):
    """One turn: the user asks for a word; 0.5 for saying it, up to 0.5 more for saying little else."""

    def __init__(self, **kwargs: Any):
        super().__init__(max_steps=1, **kwargs)
        self.word = ""

    def _start(self, options: dict[str, Any]) -> EpisodeOpening:
        self.word = WORDS[int(self.np_random.integers(len(WORDS)))]
        return EpisodeOpening("You are a helpful assistant.", ToolSet(), [{"role": "user", "content": f"Reply with just the word {self.word}."}])

    def _respond(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        self.end("answered")
        return []

    def _evaluate(self) -> tuple[float, dict[str, Any]]:
        text = next((m.get("content") or "" for m in reversed(self.transcript()) if m["role"] == "assistant"), "")
        said = float(self.word in text.lower())
        words = len(text.split())
        brevity = max(0.0, 1.0 - max(0, words - 1) / 10)
        return round(0.5 * said + 0.5 * said * brevity, 4), {"said": said, "words": words}


TOY_ENV = "trace-bench/say-word-short-v0"
if TOY_ENV not in gym.registry:
    gym.register(id=TOY_ENV, entry_point=SayWordEnv)


# ----------------------------------------------------------------------------- statistics
def bootstrap_ci(values: np.ndarray, n: int = 10_000, seed: int = 0) -> tuple[float, float]:
    """95% percentile bootstrap CI of the mean, resampling entries (seeds) with replacement."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(values), size=(n, len(values)))
    means = values[idx].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def summarize(rewards: np.ndarray, threshold: float) -> dict[str, Any]:
    """Per-seed means (rows: seeds, columns: samples) -> mean, perfect share and their CIs."""
    per_seed = rewards.mean(axis=1)
    perfect = (rewards >= threshold).mean(axis=1)
    return {"mean": float(per_seed.mean()), "ci": bootstrap_ci(per_seed),
            "perfect": float(perfect.mean()), "perfect_ci": bootstrap_ci(perfect), "per_seed": per_seed.tolist()}


def paired(a: np.ndarray, b: np.ndarray) -> dict[str, Any]:
    """Mean of ``a - b`` per seed with its paired bootstrap CI."""
    d = a.mean(axis=1) - b.mean(axis=1)
    lo, hi = bootstrap_ci(d)
    return {"diff": float(d.mean()), "ci": (lo, hi), "excludes_zero": bool(lo > 0 or hi < 0)}


# ----------------------------------------------------------------------------- evaluation
def evaluate(model: Any, tok: Any, env_id: str, seeds: list[int], a: argparse.Namespace, label: str) -> np.ndarray:
    """Rewards, shape (seeds, samples): hint off, sampled at the training settings, one fixed sampling seed per episode.

    Played through :class:`~trace_gym.policies.hf.HFPolicy` (the project's inference path: the
    same prompt rendering as training, and its prefix KV cache across turns).
    """
    from trace_gym.policies.hf import HFPolicy
    from trace_gym.rollout import rollout_batch

    policy = HFPolicy(model, tok, policy_id=label, max_new_tokens=a.max_tokens, temperature=a.temperature,
                      top_p=a.top_p, batch_size=a.eval_batch, seed=12345)
    options = None if env_id == TOY_ENV else {"hint": False}
    jobs = [(s, k) for s in seeds for k in range(a.samples)]
    rewards: list[float] = []
    for i in range(0, len(jobs), a.eval_batch):
        chunk = jobs[i: i + a.eval_batch]
        envs = [gym.make(env_id, disable_env_checker=True) for _ in chunk]
        trajs = rollout_batch(envs, policy, [s for s, _ in chunk], options,
                              policy_seeds=[s * 1000 + k for s, k in chunk])
        rewards += [t.reward for t in trajs]
        for e in envs:
            e.close()
        print(f"  [{label}] {len(rewards)}/{len(jobs)} episodes, mean reward so far {np.mean(rewards):.3f}",
              file=sys.stderr, flush=True)
    return np.array(rewards).reshape(len(seeds), a.samples)


def refusal_floor(env_id: str, seeds: list[int]) -> float:
    """Mean reward of :class:`~trace_gym.eval.floor.RefusalPolicy` (refuse every turn) over ``seeds``, hint off."""
    from trace_gym.eval.floor import RefusalPolicy
    from trace_gym.rollout import rollout_batch

    envs = [gym.make(env_id, disable_env_checker=True) for _ in seeds]
    trajs = rollout_batch(envs, RefusalPolicy(), seeds, None if env_id == TOY_ENV else {"hint": False})
    for e in envs:
        e.close()
    return float(np.mean([t.reward for t in trajs])) if trajs else 0.0


def other_envs(env_id: str) -> list[str]:
    """Registered capability envs of ``env_id``'s domain, other than ``env_id`` (format-only warm start)."""
    from trace_gym.cli.envs import env_records

    rows = env_records()
    mine = next((r for r in rows if r["id"] == env_id), None)
    if mine is None:
        raise SystemExit(f"{env_id} is not a registered trace-gym env")
    return sorted(r["id"] for r in rows if r["family"] == "capability" and r["domain"] == mine["domain"] and r["id"] != env_id)


class _TimeBudget:
    """A trainer callback that stops training after the step that crosses ``seconds``."""

    def __new__(cls, seconds: float):
        from transformers import TrainerCallback

        class Budget(TrainerCallback):
            def __init__(self) -> None:
                self.start = time.perf_counter()

            def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> Any:
                if time.perf_counter() - self.start >= seconds:
                    control.should_training_stop = True
                return control

        return Budget()


def fmt_ci(x: dict[str, Any], key: str = "mean", ci: str = "ci") -> str:
    lo, hi = x[ci]
    return f"{x[key]:.3f} [{lo:.3f}, {hi:.3f}]"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", default="trace/cap-ts-location-dependency-v0", help="env id, or say-word for the toy")
    p.add_argument("--model", default="smollm2")
    p.add_argument("--minutes", type=float, default=40.0, help="GRPO wall-clock budget")
    p.add_argument("--steps", type=int, default=1000, help="GRPO step cap")
    p.add_argument("--generations", type=int, default=8)
    p.add_argument("--seeds-per-step", type=int, default=1)
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--lora-r", type=int, default=16)
    p.add_argument("--hint-fraction", type=float, default=None, help="share of training rollouts with the hint (default: the env's)")
    p.add_argument("--warm-start-envs", default="auto",
                   help="comma list; auto: the other capability envs of the domain (format only); self: the env's own "
                        "reference episodes (capability-specific); none")
    p.add_argument("--max-resamples", type=int, default=0, help="extra draws of a constant-reward group (TrainConfig.max_resamples)")
    p.add_argument("--sft-steps", type=int, default=24)
    p.add_argument("--sft-seeds-per-env", type=int, default=16)
    p.add_argument("--sft-lr", type=float, default=2e-4)
    p.add_argument("--sft-prefix-grad", default="exact", choices=("exact", "detached"),
                   help="detached: each demonstration's prompt runs without gradient (faster, approximate)")
    p.add_argument("--max-tokens", type=int, default=96, help="tokens per agent turn")
    p.add_argument("--max-completion", type=int, default=768)
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--top-p", type=float, default=0.9)
    p.add_argument("--eval-seeds", type=int, default=32)
    p.add_argument("--eval-seed-start", type=int, default=100_000, help="held-out seeds start here (training uses 0..)")
    p.add_argument("--samples", type=int, default=2)
    p.add_argument("--eval-batch", type=int, default=16)
    p.add_argument("--perfect", type=float, default=0.999, help="reward at or above which an episode counts as perfect")
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch default)")
    p.add_argument("--out", default=None, help="keep the adapters here (default: a temporary folder)")
    p.add_argument("--json", default=None, help="also write the results here")
    a = p.parse_args()
    if a.env == "say-word":
        a.env = TOY_ENV

    import torch

    if a.threads:
        torch.set_num_threads(a.threads)
    from peft import PeftModel

    from trace_gym.registration import make_env_factory
    from trace_gym.train import TrainConfig, train
    from trace_gym.train.models import load_model_and_tokenizer
    from trace_gym.train.sft import warm_start

    held_out = list(range(a.eval_seed_start, a.eval_seed_start + a.eval_seeds))

    def evaluate_adapter(folder: Path, label: str) -> np.ndarray:
        """A fresh base model with the adapter in ``folder``, evaluated on the held-out seeds."""
        fresh, tok_a = load_model_and_tokenizer(a.model)
        print(f"[{label}] evaluating", file=sys.stderr, flush=True)
        return evaluate(PeftModel.from_pretrained(fresh, str(folder)), tok_a, a.env, held_out, a, label)

    if a.env == TOY_ENV or a.warm_start_envs == "none":
        sft_envs: list[str] = []
    elif a.warm_start_envs == "auto":
        sft_envs = other_envs(a.env)
    elif a.warm_start_envs == "self":
        sft_envs = [a.env]
    else:
        sft_envs = [e for e in a.warm_start_envs.split(",") if e]
    tmp = tempfile.TemporaryDirectory()
    root = Path(a.out or tmp.name)
    ws_dir, out = root / "warm_start", root / "grpo"
    timing: dict[str, float] = {}
    results: dict[str, Any] = {"env": a.env, "model": a.model, "held_out_seeds": len(held_out), "samples": a.samples,
                               "temperature": a.temperature, "top_p": a.top_p, "warm_start_envs": sft_envs}

    t = time.perf_counter()
    floor = refusal_floor(a.env, held_out)
    base, tok = load_model_and_tokenizer(a.model)
    print(f"[base] evaluating on {len(held_out)} held-out seeds x {a.samples}", file=sys.stderr, flush=True)
    rewards = {"base": evaluate(base, tok, a.env, held_out, a, "base")}
    timing["eval_base"] = time.perf_counter() - t

    cfg = TrainConfig(env_id=a.env, model=a.model, out=str(out), max_steps=a.steps, num_generations=a.generations,
                      seeds_per_step=a.seeds_per_step, learning_rate=a.lr, lora_r=a.lora_r, lora_alpha=2 * a.lora_r,
                      max_new_tokens_per_turn=a.max_tokens, max_completion_length=a.max_completion,
                      temperature=a.temperature, top_p=a.top_p, hint_fraction=a.hint_fraction,
                      num_train_seeds=max(256, a.steps * a.seeds_per_step), progress=False, manifest=False, plot=False,
                      sft_envs=sft_envs, sft_seeds_per_env=a.sft_seeds_per_env, sft_max_steps=a.sft_steps,
                      sft_learning_rate=a.sft_lr, sft_prefix_grad=a.sft_prefix_grad, max_resamples=a.max_resamples)
    init = None
    if sft_envs:
        t = time.perf_counter()
        print(f"[warm start] SFT {a.sft_steps} steps on reference episodes of {', '.join(sft_envs)}", file=sys.stderr, flush=True)
        ws = warm_start(cfg, out=ws_dir, model=base, tokenizer=tok, manifest=False)
        results["warm_start"] = {"steps": ws.steps, "demos": ws.demos,
                                 **{k: v for k, v in ws.record.items() if k.startswith("loss")}}
        timing["warm_start"] = time.perf_counter() - t
        t = time.perf_counter()
        rewards["warm"] = evaluate_adapter(ws_dir, "warm")
        timing["eval_warm"] = time.perf_counter() - t
        init = str(ws_dir)

    t = time.perf_counter()
    print(f"[grpo] training for up to {a.minutes:g} min / {a.steps} steps", file=sys.stderr, flush=True)
    model, _ = load_model_and_tokenizer(a.model)
    result = train(cfg.with_overrides(init_adapter=init), model=model, tokenizer=tok, env_factory=make_env_factory(a.env),
                   callbacks=[_TimeBudget(a.minutes * 60)])
    timing["grpo"] = time.perf_counter() - t
    t = time.perf_counter()
    rewards["grpo"] = evaluate_adapter(out, "grpo")
    timing["eval_grpo"] = time.perf_counter() - t

    names = {"base": f"base {a.model}", "warm": "+ warm start" + (" (own demos)" if sft_envs == [a.env] else " (format only)"), "grpo": "+ warm start + GRPO" if sft_envs else "+ GRPO"}
    summary = {k: summarize(v, a.perfect) for k, v in rewards.items()}
    start = "warm" if "warm" in rewards else "base"
    diffs = {f"grpo - {start}": paired(rewards["grpo"], rewards[start])}
    if start == "warm":
        diffs["grpo - base"] = paired(rewards["grpo"], rewards["base"])
        diffs["warm - base"] = paired(rewards["warm"], rewards["base"])
    curve = [r for _, r in result.reward_curve]
    results.update({"summary": summary, "paired": diffs, "refusal_floor": floor, "grpo_steps": result.steps,
                    "rollouts": result.rollouts, "rollout_stats": result.rollout_stats, "reward_curve": curve,
                    "timing_s": {k: round(v, 1) for k, v in timing.items()},
                    "config": {"G": a.generations, "seeds_per_step": a.seeds_per_step, "lr": a.lr, "lora_r": a.lora_r,
                               "hint_fraction": a.hint_fraction, "max_resamples": a.max_resamples, "sft_lr": a.sft_lr,
                               "sft_steps": a.sft_steps, "sft_prefix_grad": a.sft_prefix_grad, "max_tokens": a.max_tokens, "max_completion": a.max_completion}})

    print(f"\nenv {a.env}, model {a.model}; {len(held_out)} held-out seeds x {a.samples} samples, hint off, "
          f"temperature {a.temperature}, top-p {a.top_p}")
    if sft_envs:
        src = "the env's own train seeds" if sft_envs == [a.env] else f"{len(sft_envs)} other envs"
        print(f"warm start: {results['warm_start']['steps']} SFT steps (lr {a.sft_lr}), "
              f"{results['warm_start']['demos']} demonstrations from {src}")
    q = max(1, len(curve) // 4)
    quarters = [float(np.mean(curve[i: i + q])) for i in range(0, len(curve), q)][:4] if curve else []
    print(f"GRPO: {result.steps} steps (G={a.generations}, lr {a.lr}, hint fraction {a.hint_fraction}), {result.rollouts} rollouts, "
          f"{timing['grpo'] / 60:.1f} min; training reward by quarter: {', '.join(f'{x:.3f}' for x in quarters)}")
    print(f"refusal floor (refuse every turn on every seed): {floor:.3f}\n")
    print("| model | mean reward [95% CI] | perfect episodes [95% CI] |")
    print("|---|---|---|")
    for k, s in summary.items():
        print(f"| {names[k]} | {fmt_ci(s)} | {fmt_ci(s, 'perfect', 'perfect_ci')} |")
    print("\n| paired difference (per seed) | mean [95% CI] | CI excludes 0 |")
    print("|---|---|---|")
    for k, d in diffs.items():
        lo, hi = d["ci"]
        print(f"| {k} | {d['diff']:+.3f} [{lo:+.3f}, {hi:+.3f}] | {'yes' if d['excludes_zero'] else 'no'} |")
    print(f"\ntime: {', '.join(f'{k} {v / 60:.1f} min' for k, v in timing.items())}")
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
