"""``trace-gym synthesize capabilities.json --domain retail --out envs/``."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("synthesize", help="turn selected capabilities into capability-env specs (and calibrate them)")
    p.add_argument("capabilities", help="capabilities.json written by `trace-gym analyze`")
    from trace_gym.synthesis.synthesize import synthesis_domains

    p.add_argument("--domain", required=True, choices=synthesis_domains(),
                   help="target domain (the capability domains specs can be written for)")
    p.add_argument("--out", default="envs", help="folder for the specs (default: envs/)")
    p.add_argument("--only", default=None, help="comma-separated capability names instead of the selected ones")
    p.add_argument("--endpoint", default=None, help="OpenAI-compatible base URL to draft specs without a template")
    p.add_argument("--model", default=None)
    p.add_argument("--cassette", default=None, help="record/replay the drafting model's answers")
    p.add_argument("--replay", action="store_true")
    p.add_argument("--overwrite", action="store_true", help="replace specs that already exist")
    p.add_argument("--calibrate", default=None, metavar="POLICY", help="calibrate each new spec with this policy spec")
    p.add_argument("--seeds", type=int, default=8, help="calibration seeds")
    p.add_argument("--samples", type=int, default=4, help="calibration samples per seed")
    p.add_argument("--tune", action="store_true", help="tune difficulty knobs into the target band while calibrating")
    p.add_argument("--max-new-tokens", type=int, default=None, help="calibration: generation limit per action (model policies)")
    p.add_argument("--temperature", type=float, default=None, help="calibration: sampling temperature (model policies)")
    p.add_argument("--batch-size", type=int, default=None, help="calibration: episodes played in lock step (model policies)")
    p.add_argument("--difficulty", action="append", default=[], metavar="KNOB=VALUE",
                   help="calibration: knob override for every spec (repeatable), e.g. max_steps=12")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rich.console import Console
    from rich.table import Table

    from trace_gym.analysis.pipeline import load_capabilities
    from trace_gym.cli import UsageError, input_file
    from trace_gym.synthesis import synthesize
    from trace_gym.synthesis.register import register_spec_files

    console = Console()
    input_file(args.capabilities, "capabilities file", " (write one with `trace-gym analyze`)")
    try:
        doc = load_capabilities(args.capabilities)
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{args.capabilities}: not a capabilities file: {exc}") from None
    client = None
    if args.endpoint or args.cassette:
        from trace_gym.cli.analyze import _client

        client = _client(args)
    only = args.only.split(",") if args.only else None
    outcomes = synthesize(doc, args.domain, args.out, client=client, seed=args.seed, overwrite=args.overwrite, only=only)
    from rich.text import Text

    from trace_gym.render import fit_table

    table = Table(title=f"Synthesis for {args.domain} → {args.out}")
    for col in ("capability · spec", "status", "template / reasons"):
        table.add_column(col)
    for o in outcomes:
        table.add_row(Text(o.capability).append(f"\n{o.spec_id or ''}", style="dim"), o.status,
                      "; ".join(([o.template] if o.template else []) + list(o.reasons))[:200])
    console.print(fit_table(table, "status"))
    made = [Path(o.path) for o in outcomes if o.path]
    ids = register_spec_files(made)
    for i in ids:
        console.print(f"registered [bold]{i}[/bold]")
    if args.calibrate and ids:
        _calibrate(args, ids, made, console)
    console.print(f"wrote {Path(args.out) / '_synthesis.json'}")
    return 0 if all(o.status in ("template", "llm", "kept") for o in outcomes) else 1


def _calibrate(args, ids, paths, console) -> None:
    """Calibrate (and with --tune, tune and rewrite) each synthesized spec; JSON next to the spec."""
    from pathlib import Path

    import yaml
    from rich.console import Console

    from trace_gym.capabilities.calibrate import calibrate, make_policy, tune
    from trace_gym.cli.calibrate import parse_knobs
    from trace_gym.io import atomic_write_json, atomic_write_text
    from trace_gym.progress import reporting

    policy = make_policy(args.calibrate, max_new_tokens=args.max_new_tokens, temperature=args.temperature,
                         batch_size=args.batch_size)
    seeds = list(range(args.seed, args.seed + args.seeds))
    try:
        knobs = parse_knobs(args.difficulty)
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
    for env_id, path in zip(ids, paths, strict=True):
        try:
            spec_knobs = _clamped_knobs(env_id, knobs, console)
        except (ValueError, KeyError) as exc:
            console.print(f"[red]{env_id}: not calibrated:[/red] {exc}")
            continue
        with reporting(Console(stderr=True)):  # calibrate() shows its progress line
            if args.tune:
                kw = {"env_kwargs": {"difficulty": dict(spec_knobs)}} if spec_knobs else {}
                knobs_found, res, trace = tune(env_id, policy, seeds, args.samples, (0.2, 0.6), **kw)
                doc = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
                for name, value in knobs_found.items():
                    doc.setdefault("difficulty", {}).setdefault(name, {})["default"] = value
                atomic_write_text(path, yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=120))
            else:
                res, trace = calibrate(env_id, policy, seeds, args.samples, difficulty=spec_knobs or None), []
        summary = res.summary()
        atomic_write_json(Path(path).with_suffix(".calibration.json"), {**res.to_dict(), "summary": summary, "tuning": trace})
        console.print(f"{env_id}: mean reward {res.mean_reward:.3f}; " + ", ".join(
            f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in summary.items() if not isinstance(v, (dict, list))))


def _clamped_knobs(env_id: str, knobs: dict[str, float], console) -> dict[str, float]:
    """``--difficulty`` values for one spec: knobs it lacks are left out and values outside its
    declared range are moved to the nearest bound (each said on the console)."""
    import gymnasium as gym

    if not knobs:
        return {}
    env = gym.make(env_id).unwrapped
    declared = env.cap_spec.data.get("difficulty", {})
    env.close()
    out: dict[str, float] = {}
    for name, value in knobs.items():
        if name not in declared:
            console.print(f"{env_id}: no knob {name!r}; --difficulty {name} ignored for it")
            continue
        lo, hi = declared[name]["min"], declared[name]["max"]
        clamped = min(max(value, lo), hi)
        if clamped != value:
            console.print(f"{env_id}: {name}={value} is outside [{lo}, {hi}]; using {clamped}")
        out[name] = clamped
    return out
