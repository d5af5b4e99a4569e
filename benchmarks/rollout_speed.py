"""Where SmolLM2's rollout and training time goes, against a baseline commit measured in the same run.

What it measures, with the real SmolLM2-135M-Instruct on this machine:

* **limit** — the model's own forward throughput: a batched greedy decode loop over a static
  KV cache and nothing else (batch 4, the first prompts of the ToolSandbox scenarios);
* **base / adapter** — ``collect`` of the 24 ToolSandbox scenarios tagged state dependency
  (not insufficient information), greedy, batch 4, 256 tokens per action, as ``trace-gym eval
  --greedy`` plays them: seconds per action and per episode, tokens generated per second, and
  (this tree) the shares of prefill, decode, env and bookkeeping;
* **cap-base / cap-adapter** — the same on held-out seeds of ``cap-ts-state-dependency``;
* **grpo** — GRPO steps (G = 4) on ``cap-ts-location-dependency`` from the adapter: sampling,
  env, loss forward/backward and optimizer per step.

Every part runs once per code version, each in its own process: this tree and ``--baseline``
(a commit, exported with ``git archive`` under the output folder); ``llamacpp``: this tree
with the llama.cpp backend as it runs by default (``LlamaCppPolicy`` on a float copy of
SmolLM2's GGUF, the adapter merged into it, each episode served continuously: an action
complete is answered at once and its slot takes the next request); ``llamacpp-lockstep``: the
same with every batch of actions waiting for its longest one; ``llamacpp-nodraft``: the same
as ``llamacpp`` without prompt-lookup drafts; ``llamacpp-q8``: the same as ``llamacpp`` with the
float copy (the adapter merged into it in float32) stored as Q8_0, 8-bit blocks; ``llamacpp-file``:
the same as ``llamacpp`` on the GGUF's own
Q4_1 weights with the adapter as a llama.cpp LoRA (these two and ``llamacpp``: their limit is llama.cpp's own
batched decode loop on the same weights, on the scenarios' opening prompts and again on
2,048-token ones; measured when ``llama-cpp-python`` is installed;
``llamacpp``'s GRPO part is head-fast's with ``backend=llamacpp``: the episodes are sampled in
llama.cpp on the float copy with the trained LoRA loaded at every step, the loss and update
stay in torch); and ``head-fast``: this tree's GRPO
part with the training settings of ``--fast-train`` (default
``dtype=bfloat16,gradient_checkpointing=false,lm_head=full``: bf16 weights, which CPUs with
AVX512-BF16 multiply natively, no recomputation in the backward pass, and the loss's log-probs
from one float32 projection instead of TRL's chunked LM head).  Results are written per
(version, part) as they finish, so an interrupted run resumes; ``--fresh`` measures again.
The adapter is the one ``trace-gym sft`` makes with the issue's recipe (trained once, into
the output folder, unless ``--adapters`` names a folder with a manifest).  Greedy actions of
the two versions are compared episode by episode up to the first difference, the baseline's
cut where this tree's stop rule cuts it.

    python benchmarks/rollout_speed.py [--out runs/rollout_speed] [--baseline c4fa3a8] [--parts ...]

Run it on an idle machine: figures are wall-clock seconds.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PARTS = ("limit", "base", "adapter", "cap-base", "cap-adapter", "grpo")
TS_ENV = "trace/toolsandbox-v0"
CAP_ENV = "trace/cap-ts-state-dependency-v0"
GRPO_ENV = "trace/cap-ts-location-dependency-v0"
BATCH = 4
MAX_NEW = 256
STOP = "</tool_call>"
LONG_CONTEXT = 2048  # tokens: the llama.cpp limit is measured again at this context length
LLAMACPP = "llamacpp"  # this tree with the llama.cpp backend (float weights, the adapter merged)
LLAMACPP_FILE = "llamacpp-file"  # the same on the GGUF's own 4-bit weights, the adapter as a llama.cpp LoRA
LLAMACPP_LOCKSTEP = "llamacpp-lockstep"  # llamacpp with every batch waiting for its longest action (no serve)
LLAMACPP_NODRAFT = "llamacpp-nodraft"  # llamacpp without prompt-lookup drafts (lookahead=0)
LLAMACPP_Q8 = "llamacpp-q8"  # llamacpp on the same copy stored as Q8_0 (the adapter merged in float32 first)
ENGINES = (LLAMACPP, LLAMACPP_FILE, LLAMACPP_LOCKSTEP, LLAMACPP_NODRAFT, LLAMACPP_Q8)
WEIGHTS = {LLAMACPP_FILE: "file", LLAMACPP_Q8: "Q8_0"}  # each engine version's weight_type (default: auto)
SAME_LIMIT = (LLAMACPP_LOCKSTEP, LLAMACPP_NODRAFT)  # llamacpp's weights: its limit is theirs
FAST = "head-fast"  # this tree's GRPO part with --fast-train's settings (default: bf16, no gradient checkpointing)


# ----------------------------------------------------------------------------- worker side
def _use_code(code: str) -> None:
    """Import ``trace_gym`` from ``code`` (not from the editable install of this tree)."""
    sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
    sys.path.insert(0, code)
    for name in [m for m in sys.modules if m == "trace_gym" or m.startswith("trace_gym.")]:
        del sys.modules[name]


def state_dependency_scenarios() -> list[str]:
    from trace_gym.toolsandbox.scenarios import load_scenarios

    scenarios = load_scenarios()
    return sorted(n for n, s in scenarios.items()
                  if "STATE_DEPENDENCY" in s.categories and "INSUFFICIENT_INFORMATION" not in s.categories)


def _policy(adapters: str | None, backend: str = "hf") -> Any:
    if backend in ENGINES:
        from trace_gym.policies.llamacpp import LlamaCppPolicy

        policy = LlamaCppPolicy.smollm2(greedy=True, batch_size=BATCH, max_new_tokens=MAX_NEW,
                                        weight_type=WEIGHTS.get(backend, "auto"),
                                        **({"lookahead": 0} if backend == LLAMACPP_NODRAFT else {}))
    else:
        from trace_gym.policies.hf import HFPolicy

        policy = HFPolicy.smollm2(greedy=True, batch_size=BATCH, max_new_tokens=MAX_NEW)
    if adapters is not None:
        from trace_gym.route.policy import AdapterPolicy
        from trace_gym.route.registry import AdapterRegistry

        registry = AdapterRegistry(Path(adapters) / "manifest.json")
        # on the 4-bit file, the adapter as a llama.cpp LoRA (c4fa3a8's AdapterPolicy takes no merge argument)
        policy = AdapterPolicy(policy, registry, fixed=registry.names()[0],
                               **({"merge": False} if backend == LLAMACPP_FILE else {}))
    return _LockStep(policy) if backend == LLAMACPP_LOCKSTEP else policy


class _LockStep:
    """A policy without its continuous serving: every batch of actions waits for its longest one."""

    accepts_seeds = True

    def __init__(self, inner: Any):
        self.inner, self.policy_id, self.base = inner, inner.policy_id, getattr(inner, "base", inner)

    def act(self, messages: Any, tools: Any) -> str:
        return self.inner.act(messages, tools)

    def act_batch(self, requests: Any, seeds: Any = None) -> list[str]:
        return self.inner.act_batch(requests, seeds=seeds)


def _decode_stats(policy: Any) -> dict[str, Any] | None:
    inner = getattr(policy, "base", policy)
    stats = getattr(inner, "decode_stats", None)
    return stats.to_dict() if stats is not None else None


def work_episodes(env_id: str, adapters: str | None, n: int, backend: str = "hf") -> dict[str, Any]:
    import torch

    from trace_gym.rollout import collect

    if env_id == TS_ENV:
        from trace_gym.core.tasks import task_source_for

        tasks = state_dependency_scenarios()[:n]
        source = task_source_for(env_id)
        options: list[Any] = [source.reset_options(t) for t in tasks]
        seeds, labels = [0] * len(tasks), tasks
    else:
        seeds = list(range(100_000, 100_000 + n))
        options, labels = [{"hint": False}] * n, [str(s) for s in seeds]
    policy = _policy(adapters, backend)
    tok = getattr(policy, "base", policy).tokenizer
    t0, c0 = time.perf_counter(), time.process_time()
    trajs = collect(env_id, policy, seeds, options=options, batch_size=BATCH)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    actions = [t.actions for t in trajs]
    return {
        "threads": torch.get_num_threads(), "wall_s": wall, "cpu_s": cpu, "episodes": len(trajs),
        "labels": labels, "actions": actions,
        "action_tokens": sum(len(tok(a, add_special_tokens=False)["input_ids"]) for acts in actions for a in acts),
        "env_s": sum(t.timings.get("env_s", 0.0) + t.timings.get("reset_s", 0.0) for t in trajs),
        "rewards": [t.reward for t in trajs], "reasons": [t.termination_reason for t in trajs],
        "decode": _decode_stats(policy),
    }


def _limit_prompts(policy: Any) -> list[list[int]]:
    import gymnasium as gym

    from trace_gym.core.tasks import task_source_for

    source, tok, rows = task_source_for(TS_ENV), policy.tokenizer, []
    env = gym.make(TS_ENV)
    for task in state_dependency_scenarios()[:BATCH]:
        _, info = env.reset(seed=0, options=source.reset_options(task))
        rows.append(tok(policy.render_prompt(info["messages"], info["tools"]), add_special_tokens=False)["input_ids"])
    return rows


def work_limit_llamacpp(steps: int = 48, weight_type: str = "auto", long: int = LONG_CONTEXT) -> dict[str, Any]:
    """llama.cpp's own loop: one prefill of the batch, then one ``llama_decode`` of a token per row per step; on the
    scenarios' opening prompts, and again on prompts of ``long`` tokens (each opening repeated), the length an
    episode's context reaches a few actions in (``long``: the same figures at that length; ``long_flash``: the same
    with llama.cpp's flash-attention kernel, which the engine leaves off)."""
    from trace_gym.policies.llamacpp import LlamaCppPolicy

    policy = LlamaCppPolicy.smollm2(greedy=True, batch_size=BATCH, weight_type=weight_type)
    rows = _limit_prompts(policy)
    out: dict[str, Any] = {"prompt_tokens": [len(r) for r in rows], "batch": BATCH, "steps": steps,
                           **_llamacpp_loop(policy.engine, rows, steps)}
    policy.engine._forget(list(range(BATCH)))
    longs = [(r * (long // len(r) + 1))[:long] for r in rows]
    out["long"] = {"prompt_tokens": long, **_llamacpp_loop(policy.engine, longs, steps)}
    policy.close()
    # the same long loop with llama.cpp's flash-attention kernel, which the engine leaves off
    policy = LlamaCppPolicy.smollm2(greedy=True, batch_size=BATCH, weight_type=weight_type, flash_attn=True)
    out["long_flash"] = {"prompt_tokens": long, **_llamacpp_loop(policy.engine, longs, steps)}
    policy.close()
    return out


def _llamacpp_loop(engine: Any, rows: list[list[int]], steps: int) -> dict[str, float]:
    import numpy as np

    out: dict[str, float] = {}
    entries = [(tok, pos, s, pos == len(r) - 1) for s, r in enumerate(rows) for pos, tok in enumerate(r)]
    t0 = time.perf_counter()
    got = engine._run(entries)
    out["prefill_s"] = time.perf_counter() - t0
    ends = [k for k, e in enumerate(entries) if e[3]]
    nxt = [int(np.argmax(got[k])) for k in ends]
    t0 = time.perf_counter()
    for step in range(steps):
        got = engine._run([(nxt[s], len(r) + step, s, True) for s, r in enumerate(rows)])
        nxt = [int(np.argmax(got[s])) for s in range(len(rows))]
    out["decode_s"] = time.perf_counter() - t0
    out["decode_steps_per_s"] = steps / out["decode_s"]
    out["decode_tokens_per_s"] = len(rows) * steps / out["decode_s"]
    out["prefill_tokens_per_s"] = sum(len(r) for r in rows) / out["prefill_s"]
    return out


def work_limit(steps: int = 48) -> dict[str, Any]:
    import torch
    from transformers import StaticCache

    from trace_gym.policies.hf import HFPolicy

    policy = HFPolicy.smollm2(greedy=True)
    model, tok = policy.model, policy.tokenizer
    rows = _limit_prompts(policy)
    width = max(len(r) for r in rows)
    ids = torch.full((BATCH, width), tok.pad_token_id, dtype=torch.long)
    mask = torch.zeros((BATCH, width + steps + 1), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, width - len(r):] = torch.tensor(r)
        mask[i, width - len(r): width] = 1
    positions = (mask[:, :width].cumsum(-1) - 1).clamp(min=0)
    out: dict[str, Any] = {"prompt_tokens": [len(r) for r in rows], "batch": BATCH, "steps": steps}
    with torch.inference_mode():
        cache = StaticCache(config=model.config, max_cache_len=width + steps + 1)
        t0 = time.perf_counter()
        res = model(input_ids=ids, attention_mask=mask, position_ids=positions, past_key_values=cache, use_cache=True,
                    logits_to_keep=1)
        out["prefill_s"] = time.perf_counter() - t0
        nxt = res.logits[:, -1].argmax(-1)
        pos = positions[:, -1:] + 1
        t0 = time.perf_counter()
        for step in range(steps):
            mask[:, width + step] = 1
            res = model(input_ids=nxt[:, None], attention_mask=mask, position_ids=pos, past_key_values=cache,
                        use_cache=True)
            nxt = res.logits[:, -1].argmax(-1)
            pos = pos + 1
        out["decode_s"] = time.perf_counter() - t0
    out["decode_steps_per_s"] = steps / out["decode_s"]
    out["decode_tokens_per_s"] = BATCH * steps / out["decode_s"]
    out["prefill_tokens_per_s"] = sum(out["prompt_tokens"]) / out["prefill_s"]
    return out


def work_grpo(adapters: str, steps: int, out_dir: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    from transformers import TrainerCallback

    import trace_gym.core.env as core_env
    from trace_gym.train import TrainConfig
    from trace_gym.train import rollout_func as rf
    from trace_gym.train.trainer import train

    clock: dict[str, float] = {"env": 0.0, "rollout": 0.0}
    step_step = core_env.ToolEnv.step

    def timed_step(self: Any, action: Any) -> Any:
        t = time.perf_counter()
        try:
            return step_step(self, action)
        finally:
            clock["env"] += time.perf_counter() - t

    core_env.ToolEnv.step = timed_step  # type: ignore[method-assign]
    call = rf.EnvRolloutFunc.__call__

    def timed_call(self: Any, prompts: Any, trainer: Any) -> Any:
        t = time.perf_counter()
        try:
            return call(self, prompts, trainer)
        finally:
            clock["rollout"] += time.perf_counter() - t

    rf.EnvRolloutFunc.__call__ = timed_call  # type: ignore[method-assign]
    rows: list[dict[str, float]] = []

    class Timer(TrainerCallback):
        def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> Any:
            clock.update(env=0.0, rollout=0.0, start=time.perf_counter(), opt=0.0)

        def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, **kw: Any) -> Any:
            clock["opt_start"] = time.perf_counter()

        def on_optimizer_step(self, args: Any, state: Any, control: Any, **kw: Any) -> Any:
            clock["opt"] = time.perf_counter() - clock["opt_start"]

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> Any:
            total = time.perf_counter() - clock["start"]
            rows.append({"total_s": total, "sampling_s": clock["rollout"] - clock["env"], "env_s": clock["env"],
                         "optimizer_s": clock["opt"], "loss_s": total - clock["rollout"] - clock["opt"]})

    registry = json.loads((Path(adapters) / "manifest.json").read_text())
    init = str((Path(adapters) / registry["adapters"][0]["path"]).resolve())
    cfg = TrainConfig(env_id=GRPO_ENV, model="smollm2", out=out_dir, num_generations=4, seeds_per_step=1,
                      max_steps=steps, max_new_tokens_per_turn=96, max_completion_length=768, learning_rate=5e-5,
                      temperature=0.7, top_p=0.9, init_adapter=init, save_steps=0, plot=False, manifest=False,
                      progress=False, **(extra or {}))
    result = train(cfg, callbacks=[Timer()])
    return {"steps": rows, "rollouts": getattr(result, "rollouts_used", None)}


def worker(args: argparse.Namespace) -> int:
    _use_code(args.code)
    import trace_gym

    if not Path(trace_gym.__file__).resolve().is_relative_to(Path(args.code).resolve()):
        raise SystemExit(f"imported trace_gym from {trace_gym.__file__}, not from {args.code}")
    part, backend = args.worker, args.backend
    if part == "limit":
        res = (work_limit_llamacpp(weight_type=WEIGHTS.get(backend, "auto")) if backend in ENGINES
               else work_limit())
    elif part in ("base", "adapter"):
        res = work_episodes(TS_ENV, args.adapters if part == "adapter" else None, args.scenarios, backend)
    elif part in ("cap-base", "cap-adapter"):
        res = work_episodes(CAP_ENV, args.adapters if part == "cap-adapter" else None, args.cap_seeds, backend)
    else:
        res = work_grpo(args.adapters, args.grpo_steps, args.scratch, json.loads(args.train_extra or "{}"))
    tmp = Path(args.result).with_suffix(".tmp")
    tmp.write_text(json.dumps(res))
    os.replace(tmp, args.result)
    return 0


# ----------------------------------------------------------------------------- orchestration
def parse_settings(text: str) -> dict[str, Any]:
    """``"dtype=bfloat16,gradient_checkpointing=false"`` → ``{"dtype": "bfloat16", "gradient_checkpointing": False}``,
    each value parsed as ``trace-gym train --set`` parses it (:meth:`TrainConfig.set_from_string`)."""
    from trace_gym.train import TrainConfig

    cfg, names = TrainConfig(env_id=GRPO_ENV, model="smollm2", out="."), []
    for item in (x.strip() for x in text.split(",") if x.strip()):
        cfg = cfg.set_from_string(item)
        names.append(item.split("=", 1)[0].strip())
    return {n: getattr(cfg, n) for n in names}


def export_baseline(commit: str, out: Path) -> Path:
    folder = out / f"code-{commit}"
    if (folder / "trace_gym" / "__init__.py").exists():
        return folder
    tmp = out / f".code-{commit}.tmp"
    subprocess.run(["rm", "-rf", str(tmp)], check=True)
    tmp.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
    os.replace(tmp, folder)
    return folder


def ensure_adapter(out: Path) -> Path:
    folder = out / "adapters"
    if (folder / "manifest.json").exists():
        return folder
    print("training the adapter (trace-gym sft, the issue's recipe; about 10 minutes) ...", flush=True)
    cmd = [sys.executable, "-m", "trace_gym.cli", "sft", "--model", "smollm2", "--out", str(folder / "state"),
           "--sft-envs", "trace/cap-ts-state-dependency-v0,trace/cap-ts-location-dependency-v0", "--sft-seeds", "32",
           "--sft-steps", "30", "--sft-lr", "4e-4", "--sft-prefix-grad", "detached", "--no-progress"]
    subprocess.run(cmd, check=True, cwd=ROOT)
    return folder


def run_part(version: str, code: Path, part: str, a: argparse.Namespace, out: Path) -> dict[str, Any]:
    result = out / f"{version}-{part}.json"
    if result.exists() and not a.fresh:
        return json.loads(result.read_text())
    print(f"[{time.strftime('%H:%M:%S')}] {version}: {part} ...", flush=True)
    cmd = [sys.executable, __file__, "--worker", part, "--code", str(code), "--result", str(result),
           "--backend", version if version in ENGINES else "hf",
           "--adapters", str(a.adapters), "--scenarios", str(a.scenarios), "--cap-seeds", str(a.cap_seeds),
           "--grpo-steps", str(a.grpo_steps), "--scratch", str(out / f"grpo-{version}")]
    if version == FAST:
        cmd += ["--train-extra", json.dumps(a.fast_settings)]
    elif version == LLAMACPP and part == "grpo":  # head-fast's settings, sampling in llama.cpp
        cmd += ["--train-extra", json.dumps({**a.fast_settings, "backend": "llamacpp"})]
    from trace_gym.data import toolsandbox_data_dir

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TRL_EXPERIMENTAL_SILENCE": "1",
           "TOOLSANDBOX_DATA_DIR": str(toolsandbox_data_dir())}  # the baseline looks for data beside its own code
    with open(out / f"{version}-{part}.log", "w") as log:
        subprocess.run(cmd, check=True, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=out)
    return json.loads(result.read_text())


def _cut(action: str) -> str:
    return action[: action.index(STOP) + len(STOP)] if STOP in action else action


def compare_actions(old: dict[str, Any], new: dict[str, Any]) -> tuple[int, int, int, int]:
    """(actions compared, equal, episodes equal throughout, episodes) — each episode up to its first difference."""
    compared = equal = same_eps = 0
    for a, b in zip(old["actions"], new["actions"], strict=True):
        same = len(a) == len(b)
        for x, y in zip(a, b, strict=False):
            compared += 1
            if _cut(x).strip() != y.strip():
                same = False
                break
            equal += 1
        same_eps += int(same)
    return compared, equal, same_eps, len(new["actions"])


def episode_row(name: str, old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    def per(d: dict[str, Any]) -> tuple[float, float, float, float]:
        n_actions = sum(len(x) for x in d["actions"])
        return (d["wall_s"] / n_actions, 60 * n_actions / d["wall_s"], 60 * d["episodes"] / d["wall_s"],
                d["action_tokens"] / n_actions)

    o, n = per(old), per(new)
    compared, equal, same_eps, eps = compare_actions(old, new)
    return [name, f"{o[0]:.2f} → {n[0]:.2f}", f"{o[1]:.1f} → {n[1]:.1f} ({n[1] / o[1]:.1f}×)",
            f"{o[2]:.2f} → {n[2]:.2f} ({n[2] / o[2]:.1f}×)", f"{o[3]:.0f} → {n[3]:.0f}", f"{equal}/{compared}, {same_eps}/{eps}"]


def shares_row(name: str, new: dict[str, Any], limit: dict[str, Any]) -> list[str]:
    d = new["decode"] or {}
    wall = new["wall_s"]
    pre, dec, env = d.get("prefill_s", 0.0), d.get("decode_s", 0.0), new["env_s"]
    other = max(0.0, wall - pre - dec - env)
    steps_s = d.get("decode_steps", 0) / dec if dec else float("nan")
    tok_s = d.get("generated_tokens", 0) / dec if dec else float("nan")
    stops = d.get("stops", {})
    drafted, kept = d.get("drafted_tokens", 0), d.get("accepted_tokens", 0)
    per_step = d.get("generated_tokens", 0) / d["decode_steps"] if d.get("decode_steps") else float("nan")
    return [name, f"{tok_s:.1f} ({tok_s / limit['decode_tokens_per_s']:.0%})", f"{steps_s:.2f}", f"{per_step:.2f}",
            f"{kept}/{drafted}", f"{pre / wall:.0%}", f"{dec / wall:.0%}", f"{env / wall:.1%}", f"{other / wall:.0%}",
            "/".join(str(stops.get(k, 0)) for k in ("token", "string", "limit"))]


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def report(res: dict[tuple[str, str], dict[str, Any]], a: argparse.Namespace) -> str:
    base, head = a.baseline, "head"
    out = []
    lim = res.get((head, "limit"))
    if lim:
        out.append(f"Limit (batch {lim['batch']}, prompts of {lim['prompt_tokens']} tokens, static KV cache, greedy): "
                   f"decode {lim['decode_steps_per_s']:.2f} steps/s = {lim['decode_tokens_per_s']:.1f} tokens/s; "
                   f"prefill {lim['prefill_tokens_per_s']:.0f} tokens/s.\n")
    engine_titles = {LLAMACPP: "llama.cpp, float weights (the adapter merged)",
                     LLAMACPP_LOCKSTEP: "llama.cpp, float weights, in lock step (each batch waits for its longest action)",
                     LLAMACPP_NODRAFT: "llama.cpp, float weights, without prompt-lookup drafts",
                     LLAMACPP_FILE: "llama.cpp, the GGUF's Q4_1 weights (the adapter as a LoRA)",
                     LLAMACPP_Q8: "llama.cpp, the float copy stored as Q8_0 (the adapter merged)"}
    limits = {head: lim}
    for version, title in engine_titles.items():
        limits[version] = llim = res.get((LLAMACPP if version in SAME_LIMIT else version, "limit"))
        if llim and version not in SAME_LIMIT:
            out.append(f"Limit of {title}: the same prompts, its own batched decode loop: decode "
                       f"{llim['decode_steps_per_s']:.2f} steps/s = {llim['decode_tokens_per_s']:.1f} tokens/s; prefill "
                       f"{llim['prefill_tokens_per_s']:.0f} tokens/s.\n")
            if "long" in llim:
                lg = llim["long"]
                out.append(f"The same at {lg['prompt_tokens']}-token contexts: decode {lg['decode_tokens_per_s']:.1f} "
                           f"tokens/s; prefill {lg['prefill_tokens_per_s']:.0f} tokens/s.\n")
            if "long_flash" in llim:
                lf = llim["long_flash"]
                out.append(f"With llama.cpp's flash-attention kernel (off in the engine): decode "
                           f"{lf['decode_tokens_per_s']:.1f} tokens/s; prefill {lf['prefill_tokens_per_s']:.0f} tokens/s.\n")
    episode_parts = ("base", "adapter", "cap-base", "cap-adapter")
    titles = {head: "this tree (transformers)", **{v: f"this tree on {t}" for v, t in engine_titles.items()}}
    for version, title in titles.items():
        rows = [episode_row(p, res[(base, p)], res[(version, p)]) for p in episode_parts
                if (base, p) in res and (version, p) in res]
        if rows:
            out.append(f"\n{base} → {title}; equal: greedy actions equal to {base}'s:\n")
            out.append(table(["policy", "s/action", "actions/min", "episodes/min", "tokens/action",
                              "equal actions, episodes"], rows))
    for version, title in titles.items():
        limit = limits.get(version)
        if not limit:
            continue
        rows = [shares_row(p, res[(version, p)], limit) for p in episode_parts if (version, p) in res]
        if rows:
            out.append(f"\n{title[0].upper() + title[1:]}, where the time goes (decode tokens/s as a share of its "
                       "limit's; stops: end-of-turn token / stop string / token limit):\n")
            out.append(table(["policy", "decode tokens/s", "steps/s", "tokens/step", "drafts kept", "prefill",
                              "decode", "env", "other", "stops"], rows))
    if (base, "grpo") in res and any((v, "grpo") in res for v in (head, FAST, LLAMACPP)):
        def mean(d: dict[str, Any], k: str) -> float:
            return statistics.mean(s[k] for s in d["steps"])

        def tokens(version: str) -> float:
            """Mean completion tokens (agent and env) per step, from the run's own metrics.jsonl (the G = 4 episodes)."""
            path = a.out_dir / f"grpo-{version}" / "metrics.jsonl"
            rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
            lengths = [r["completions/mean_length"] * 4 for r in rows if "completions/mean_length" in r]
            return statistics.mean(lengths) if lengths else float("nan")

        keys = ("total_s", "sampling_s", "env_s", "loss_s", "optimizer_s")
        fast = ','.join(f'{k}={v}' for k, v in a.fast_settings.items())
        names = {base: base, head: "this tree", FAST: f"this tree, {fast}",
                 LLAMACPP: f"this tree, {fast}, sampling in llama.cpp (backend=llamacpp)"}
        b = mean(res[(base, "grpo")], "total_s")
        b_tok = b / tokens(base)
        rows = [[names[v]] + [f"{mean(res[(v, 'grpo')], k):.1f}" for k in keys]
                + [f"{b / mean(res[(v, 'grpo')], 'total_s'):.1f}×", f"{tokens(v):.0f}",
                   f"{1000 * mean(res[(v, 'grpo')], 'total_s') / tokens(v):.1f}",
                   f"{b_tok / (mean(res[(v, 'grpo')], 'total_s') / tokens(v)):.1f}×"]
                for v in (base, head, FAST, LLAMACPP) if (v, "grpo") in res]
        out.append(f"\nOne GRPO step (G = 4, {GRPO_ENV}), mean of {a.grpo_steps} steps, seconds; speed-up against "
                   f"{base}, per step and per completion token (the versions sample different episodes once their "
                   "draws differ, so a step's work differs too):\n")
        out.append(table(["version", "total", "sampling", "env", "loss fwd/bwd", "optimizer", "speed-up",
                          "completion tokens", "ms/token", "per token"], rows))
    return "\n".join(out)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="runs/rollout_speed")
    p.add_argument("--baseline", default="c4fa3a8")
    p.add_argument("--adapters", default=None, help="a folder with manifest.json (default: trained into OUT/adapters)")
    p.add_argument("--parts", default=",".join(PARTS))
    p.add_argument("--scenarios", type=int, default=24)
    p.add_argument("--cap-seeds", type=int, default=8)
    p.add_argument("--grpo-steps", type=int, default=2)
    p.add_argument("--versions", default="baseline,head,head-fast,llamacpp,llamacpp-file",
                   help="which code versions to measure now (baseline, head, head-fast: this tree's GRPO with "
                        "--fast-train, llamacpp: this tree on llama.cpp with float weights, llamacpp-nodraft, "
                        "llamacpp-lockstep, llamacpp-q8: the float copy as Q8_0, llamacpp-file: on the GGUF's "
                        "4-bit weights)")
    p.add_argument("--fast-train", default="dtype=bfloat16,gradient_checkpointing=false,lm_head=full",
                   help="TrainConfig settings of the head-fast GRPO part, KEY=VALUE,...")
    p.add_argument("--fresh", action="store_true", help="measure again what an earlier run stored")
    p.add_argument("--worker", choices=PARTS, help=argparse.SUPPRESS)
    p.add_argument("--code", help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    p.add_argument("--scratch", help=argparse.SUPPRESS)
    p.add_argument("--backend", choices=["hf", *ENGINES], default="hf", help=argparse.SUPPRESS)
    p.add_argument("--train-extra", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.worker:
        return worker(a)
    out = Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    parts = [x for x in a.parts.split(",") if x]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        p.error(f"--parts: unknown {unknown}; choose from {', '.join(PARTS)}")
    from trace_gym.train.config import ConfigError

    try:
        a.fast_settings = parse_settings(a.fast_train)
    except ConfigError as exc:
        p.error(f"--fast-train: {exc}")
    a.adapters = Path(a.adapters).resolve() if a.adapters else ensure_adapter(out)
    versions = {a.baseline: export_baseline(a.baseline, out), "head": ROOT, FAST: ROOT, **dict.fromkeys(ENGINES, ROOT)}
    run_now = {a.baseline if v == "baseline" else v for v in a.versions.split(",") if v}
    if run_now & set(ENGINES) and importlib.util.find_spec("llama_cpp") is None:
        print("llama-cpp-python is not installed: the llamacpp versions are not measured", flush=True)
        run_now -= set(ENGINES)
    res: dict[tuple[str, str], dict[str, Any]] = {}
    for part in parts:
        for version, code in versions.items():
            if ((part == "limit" and version in (a.baseline, *SAME_LIMIT))
                    or (part == "grpo" and version in (LLAMACPP_FILE, LLAMACPP_Q8, *SAME_LIMIT))
                    or (version == FAST and part != "grpo")):
                continue  # the model's own speed: one measurement per engine; GRPO samples on float weights;
                # head-fast differs from head only in its training settings
            stored = out / f"{version}-{part}.json"
            if version in run_now:
                res[(version, part)] = run_part(version, code, part, a, out)
            elif stored.exists():
                res[(version, part)] = json.loads(stored.read_text())
    a.out_dir = out
    text = report(res, a)
    (out / "report.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
