"""How often does SmolLM2-135M emit a parseable call to an offered tool on its first turn?

Greedy first turns of ToolSandbox scenarios (``trace/toolsandbox-v0``, every 16th of the
test split, so several categories) under each prompt format: ``hermes`` (``<tool_call>{...}</tool_call>`` blocks,
the project's default before SmolLM2's own format existed) and ``smollm2`` (SmolLM2's
function-calling convention, the default for SmolLM2 now), each with the compact and the
JSON tool listing.  Counts, per format: actions that parse as at least one call, calls
that name only offered tools, and format errors.

    .venv/bin/python benchmarks/smollm2_call_probe.py --scenarios 8 [--adapter adapters/NAME] [--json]

``--adapter`` loads a PEFT adapter (e.g. a warm start) on top of SmolLM2.  Takes about
a minute per format and 8 scenarios on two CPU cores.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def probe(n: int, formats: list[tuple[str, str]], adapter: str | None = None, max_new_tokens: int = 96,
          threads: int = 1, stride: int = 16) -> dict:
    import gymnasium as gym
    import torch

    import trace_gym  # noqa: F401
    from trace_gym.core.tasks import task_source
    from trace_gym.core.toolcalls import parse_action
    from trace_gym.policies.hf import HFPolicy, load_smollm2

    torch.set_num_threads(threads)
    model, tok = load_smollm2()
    if adapter:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, adapter)
        model.eval()
    env = gym.make("trace/toolsandbox-v0", disable_env_checker=True)
    src = task_source(env)
    requests = []
    for tid in src.task_ids()[::stride][:n]:  # spread over the categories
        _, info = env.reset(seed=0, options=src.reset_options(tid))
        requests.append((tid, info["messages"], info["tools"]))
    env.close()
    results: dict = {"scenarios": [r[0] for r in requests], "formats": {}}
    for tool_format, listing in formats:
        policy = HFPolicy(model, tok, greedy=True, max_new_tokens=max_new_tokens, tool_format=tool_format,
                          tool_listing=listing, batch_size=1)
        started = time.perf_counter()
        outs = []
        for tid, m, t in requests:
            outs.append(policy.act_batch([(m, t)], seeds=[0])[0])
            print(f"  {tool_format}/{listing} {tid}: {time.perf_counter() - started:.0f}s", file=sys.stderr, flush=True)
        row = {"parseable_call": 0, "offered_tool_call": 0, "format_error": 0, "n": len(requests), "samples": []}
        for (tid, _, tools), text in zip(requests, outs, strict=True):
            parsed = parse_action(text)
            offered = {t["function"]["name"] for t in tools}
            row["parseable_call"] += parsed.is_call
            row["offered_tool_call"] += parsed.is_call and all(name in offered for name, _ in parsed.calls)
            row["format_error"] += parsed.error is not None
            row["samples"].append({"scenario": tid, "text": text[:300]})
        row["seconds"] = round(time.perf_counter() - started, 1)
        results["formats"][f"{tool_format}/{listing}"] = row
        print(f"{tool_format}/{listing}: parseable {row['parseable_call']}/{row['n']}, offered tool "
              f"{row['offered_tool_call']}/{row['n']}, format errors {row['format_error']} ({row['seconds']}s)",
              file=sys.stderr, flush=True)
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenarios", type=int, default=8)
    ap.add_argument("--adapter", default=None)
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1: no OpenMP spinning on a busy machine)")
    ap.add_argument("--stride", type=int, default=16, help="take every STRIDE-th scenario of the test split")
    ap.add_argument("--formats", default="hermes/compact,smollm2/json,smollm2/compact",
                    help="comma list of FORMAT/LISTING")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    formats = [tuple(f.split("/", 1)) for f in args.formats.split(",")]
    res = probe(args.scenarios, formats, args.adapter, args.max_new_tokens, args.threads, args.stride)  # type: ignore[arg-type]
    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    print(f"{'format':<18} {'parseable call':>15} {'offered tool':>13} {'format error':>13} {'seconds':>8}")
    for name, row in res["formats"].items():
        n = row["n"]
        print(f"{name:<18} {row['parseable_call']:>8}/{n:<6} {row['offered_tool_call']:>6}/{n:<6} "
              f"{row['format_error']:>6}/{n:<6} {row['seconds']:>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
