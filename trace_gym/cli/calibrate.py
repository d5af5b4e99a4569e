"""``trace-gym calibrate ENV_ID --policy SPEC --seeds N --samples K [--tune --band LO,HI]``.

Prints a JSON report (mean reward, success rate, all-0/all-1/constant group fractions,
pass@k, per-case means); ``--tune`` searches the spec's difficulty knobs for a mean
reward inside the band and writes the tuned spec.  Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("calibrate", help="measure a policy on a capability environment; optionally tune its difficulty")
    p.add_argument("env_id", help="capability environment id, e.g. trace/cap-refund-policy-v0")
    p.add_argument("--policy", required=True, metavar="SPEC",
                   help="reference | noop | refuse | scripted:FILE | hf:MODEL | smollm2 | openai:URL#MODEL")
    p.add_argument("--seeds", default="8", help="number of seeds N (0..N-1), or a list such as 0-9,20")
    p.add_argument("--samples", type=int, default=4, help="episodes per seed (the group size, default 4)")
    p.add_argument("--difficulty", action="append", metavar="KNOB=VALUE", help="knob override (repeatable)")
    p.add_argument("--tune", action="store_true", help="search the difficulty knobs for a mean reward inside --band")
    p.add_argument("--band", default="0.2,0.6", help="target mean-reward band LO,HI for --tune (default 0.2,0.6)")
    p.add_argument("--max-rounds", type=int, default=4, help="tuning rounds over all knobs (default 4)")
    p.add_argument("--out", metavar="PATH", help="where --tune writes the tuned spec (default ./<id>.tuned.yaml)")
    p.add_argument("--json-out", metavar="FILE", help="also write the JSON report to FILE")
    p.add_argument("--temperature", type=float, help="sampling temperature (model policies)")
    p.add_argument("--max-new-tokens", type=int, help="generation limit per action (model policies)")
    p.add_argument("--batch-size", type=int, help="episodes played in lock step (model policies batch their generation)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_run)


def _seeds(text: str) -> list[int]:
    from trace_gym.cli import check_count

    if text.strip().isdigit():
        n = int(text)
        check_count("--seeds", n)
        return list(range(n))
    from .rollout import parse_seeds

    return parse_seeds(text)


def parse_band(text: str) -> tuple[float, float]:
    """``--band LO,HI`` as two numbers with ``0 <= LO <= HI <= 1``."""
    lo, sep, hi = text.partition(",")
    try:
        band = (float(lo), float(hi))
    except ValueError:
        band = None
    if not sep or band is None or not 0.0 <= band[0] <= band[1] <= 1.0:
        raise ValueError(f"--band expects LO,HI: two mean rewards with 0 <= LO <= HI <= 1, got {text!r}")
    return band


def parse_knobs(items: list[str] | None) -> dict[str, float]:
    """``--difficulty KNOB=VALUE`` flags as a mapping (ints unless the value has a dot)."""
    out: dict[str, float] = {}
    for item in items or []:
        key, sep, val = item.partition("=")
        if not sep:
            raise ValueError(f"--difficulty expects KNOB=VALUE, got {item!r}")
        try:
            out[key.strip()] = float(val) if "." in val else int(val)
        except ValueError:
            raise ValueError(f"--difficulty {key.strip()}: {val!r} is not a number") from None
    return out


def _run(args: argparse.Namespace) -> int:
    import yaml
    from rich.console import Console

    from trace_gym.capabilities.calibrate import calibrate, make_policy, tune
    from trace_gym.cli import MAX_EPISODES, CommandError, UsageError, check_count, check_policy_file, writable_output
    from trace_gym.io import atomic_write_text
    from trace_gym.progress import reporting

    err = Console(stderr=True, soft_wrap=True)
    check_count("--samples", args.samples)
    check_count("--max-rounds", args.max_rounds, low=0)
    check_count("--batch-size", args.batch_size)
    check_policy_file(args.policy)
    try:
        seeds = _seeds(args.seeds)
        knobs = parse_knobs(args.difficulty)
        band = parse_band(args.band)
        policy = make_policy(args.policy, temperature=args.temperature, max_new_tokens=args.max_new_tokens, batch_size=args.batch_size)
    except (ValueError, TypeError) as exc:
        raise UsageError(str(exc)) from None
    check_count("--seeds x --samples", len(seeds) * args.samples, high=MAX_EPISODES)
    for flag, path in (("--json-out", args.json_out), ("--out", args.out if args.tune else None)):
        if path:  # an unwritable output fails now, not after the episodes
            writable_output(path, flag)
    with reporting(err, enabled=not args.no_progress):  # calibrate() shows its progress line on stderr
        try:
            if args.tune:
                def log(msg: str) -> None:
                    err.print(f"tune: {msg}", markup=False, highlight=False)

                env_kwargs = {"difficulty": knobs} if knobs else None
                best, res, trace = tune(args.env_id, policy, seeds, args.samples, band, max_rounds=args.max_rounds,
                                        env_kwargs=env_kwargs, log=log)
            else:
                res = calibrate(args.env_id, policy, seeds, args.samples, difficulty=knobs or None)
        except Exception as exc:  # a clear message instead of a traceback for bad ids, knobs, policies
            raise CommandError(f"{type(exc).__name__}: {exc}") from None
    report = res.summary()
    if args.tune:
        import gymnasium as gym

        env = gym.make(args.env_id).unwrapped
        doc = env.cap_spec.with_knob_defaults(best)
        out = Path(args.out) if args.out else Path(f"{env.cap_spec.id}.tuned.yaml")
        atomic_write_text(out, yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=120))
        lo_b, hi_b = band
        report["tune"] = {"band": [lo_b, hi_b], "in_band": lo_b <= res.mean_reward <= hi_b, "knobs": best,
                          "written": str(out), "trace": trace}
    text = json.dumps(report, indent=2)
    print(text)
    if args.json_out:
        atomic_write_text(Path(args.json_out), text + "\n")
    return 0
