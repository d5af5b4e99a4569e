"""``trace-gym synthesize capabilities.json --domain retail --out DIR``, or ``trace-gym synthesize --run DIR``."""

from __future__ import annotations

import argparse
from typing import Any

DESCRIPTION = """Write one capability-env spec per selected capability (same tools, policy and formats as the target,
on a synthetic world), register it, and score the model on it (calibration).

reads:  CAPABILITIES (capabilities.json of `trace-gym analyze`), or with --run DIR the run's analysis
        (DIR/stages/analysis.json, DIR/analysis/) and its model (DIR/run.json)
writes: --out DIR  one <spec id>.yaml per capability, _synthesis.json; with --calibrate, <spec>.calibration.json
        --run DIR  the same into DIR/specs/ (every later verb of the run registers them: no TRACE_GYM_ENVS_DIR
                   needed), then calibrates each with the run's model (--seeds x --samples episodes, resumed per
                   env; --tune searches its knobs toward a 20-60% mean reward); DIR/stages/synthesis.json and
                   DIR/stages/calibration.json
next:   trace-gym sft --run DIR   (or trace-gym train --run DIR)
"""


CALIBRATION_REFERENCE_SEEDS = 4  # episodes of each spec's reference solution: is the env solvable?
TUNE_ROUNDS = 4  # --tune with --run: rounds of the knob search (as `trace-gym calibrate --tune`)


def register(sub: argparse._SubParsersAction) -> None:
    from trace_gym.cli.runs import RUN_HELP

    p = sub.add_parser("synthesize", help="3. turn selected capabilities into capability-env specs (and calibrate them)",
                       description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("capabilities", nargs="?", help="capabilities.json written by `trace-gym analyze`")
    from trace_gym.synthesis.synthesize import synthesis_domains

    p.add_argument("--domain", default=None, choices=synthesis_domains(),
                   help="target domain (the capability domains specs can be written for; with --run, the target's)")
    p.add_argument("--out", default=None, help="folder for the specs (a folder of yours: list it in TRACE_GYM_ENVS_DIR "
                   "for other commands to find them)")
    p.add_argument("--run", metavar="DIR", help=RUN_HELP)
    p.add_argument("--max-envs", type=int, default=None, metavar="N", help="with --run: make at most N envs")
    p.add_argument("--only", default=None, help="comma-separated capability names instead of the selected ones")
    p.add_argument("--endpoint", default=None, help="OpenAI-compatible base URL to draft specs without a template")
    p.add_argument("--model", default=None)
    p.add_argument("--cassette", default=None, help="record/replay the drafting model's answers")
    p.add_argument("--replay", action="store_true")
    p.add_argument("--overwrite", action="store_true", help="replace specs that already exist")
    p.add_argument("--calibrate", default=None, metavar="POLICY", help="calibrate each new spec with this policy spec")
    p.add_argument("--seeds", type=int, default=8, help="calibration seeds (default 8)")
    p.add_argument("--samples", type=int, default=4, help="calibration samples per seed (default 4)")
    p.add_argument("--tune", action="store_true", help="tune difficulty knobs into the target band while calibrating")
    p.add_argument("--max-new-tokens", type=int, default=None, help="calibration: generation limit per action (model policies)")
    p.add_argument("--temperature", type=float, default=None, help="calibration: sampling temperature (model policies)")
    p.add_argument("--batch-size", type=int, default=None, help="calibration: episodes played in lock step (model policies)")
    p.add_argument("--difficulty", action="append", default=[], metavar="KNOB=VALUE",
                   help="calibration: knob override for every spec (repeatable), e.g. max_steps=12")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    import dataclasses
    from pathlib import Path

    from rich.console import Console

    from trace_gym.analysis.pipeline import load_capabilities
    from trace_gym.cli import UsageError, input_file
    from trace_gym.synthesis import synthesize
    from trace_gym.synthesis.register import register_spec_files

    console = Console()
    if args.run:
        return _run_in_folder(args, console)
    for flag, value in (("a capabilities file", args.capabilities), ("--domain", args.domain), ("--out", args.out)):
        if not value:
            raise UsageError(f"give {flag} (or --run DIR to synthesize for a run)")
    if args.max_envs is not None:
        raise UsageError("--max-envs chooses what a run synthesizes: give --run DIR")
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
    console.print(_outcomes_table([dataclasses.asdict(o) for o in outcomes], f"Synthesis for {args.domain} → {args.out}"))
    made = [Path(o.path) for o in outcomes if o.path]
    ids = register_spec_files(made)
    for i in ids:
        console.print(f"registered [bold]{i}[/bold]")
    if args.calibrate and ids:
        _calibrate(args, ids, made, console)
    console.print(f"wrote {Path(args.out) / '_synthesis.json'}")
    return 0 if all(o.status in ("template", "llm", "kept") for o in outcomes) else 1


def _outcomes_table(outcomes: list[dict[str, Any]], title: str) -> Any:
    """One row per capability: its spec id, the synthesis status and the template used or the reasons."""
    from rich.table import Table
    from rich.text import Text

    from trace_gym.render import fit_table

    table = Table(title=title)
    for col in ("capability · spec", "status", "template / reasons"):
        table.add_column(col)
    for o in outcomes:
        table.add_row(Text(o["capability"]).append(f"\n{o['spec_id'] or ''}", style="dim"), o["status"],
                      "; ".join(([o["template"]] if o["template"] else []) + list(o["reasons"]))[:200])
    return fit_table(table, "status")


def _run_in_folder(args: argparse.Namespace, console: Any) -> int:
    """``synthesize --run DIR``: the stages ``synthesis`` (specs into ``DIR/specs``) and ``calibration`` (the run's
    model on each)."""
    import dataclasses

    from trace_gym.cli import UsageError, check_count
    from trace_gym.cli.calibrate import parse_knobs
    from trace_gym.cli.runs import generation, loading_model, need, open_run, refuse_with_run, run_stage, use_run_specs
    from trace_gym.pipeline import Analysis, Calibration, Synthesis, calibrate_envs, synthesize_envs
    from trace_gym.policies import policy_from_spec
    from trace_gym.progress import reporting

    refuse_with_run(args, capabilities=args.capabilities, domain=args.domain, out=args.out, calibrate=args.calibrate,
                    overwrite=args.overwrite)
    check_count("--seeds", args.seeds)
    check_count("--samples", args.samples)
    check_count("--max-envs", args.max_envs)
    check_count("--batch-size", args.batch_size)
    try:
        knobs = parse_knobs(args.difficulty)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    run = open_run(args.run)
    analysis = need(run, "analysis", Analysis)
    if args.only:
        analysis = dataclasses.replace(analysis, chosen=[c.strip() for c in args.only.split(",") if c.strip()])
    domain = run.target().domain
    if domain is None:
        raise UsageError(f"{run.target().env_id} offers no tool domain to synthesize capability environments for")
    client = None
    if args.endpoint or args.cassette:
        from trace_gym.cli.analyze import _client

        client = _client(args)
    syn, _ = run_stage(run, "synthesis", lambda: synthesize_envs(analysis, domain, run.specs, seed=args.seed,
                                                                 max_envs=args.max_envs, client=client),
                       Synthesis, settings={"only": args.only, "max_envs": args.max_envs, "seed": args.seed,
                                            "endpoint": args.endpoint, "model": args.model}, after=("analysis",))
    console.print(_outcomes_table(syn.outcomes, f"Synthesis for {domain} → {run.specs}"))
    use_run_specs(run)
    if not syn.envs:
        console.print("no capability env could be synthesized: the run stops here")
        return 1
    doc = run.settings()
    gen = generation(run, args)
    band = (0.2, 0.6) if args.tune else None

    def base_policy() -> Any:
        opts = {**gen, "batch_size": gen.get("batch_size") if gen.get("batch_size", 1) > 1 else None}
        return loading_model(doc["policy"], lambda: policy_from_spec(doc["policy"], **opts))

    settings = {"seeds": args.seeds, "samples": args.samples, "seed": args.seed, "tune": args.tune, "knobs": knobs,
                "generation": gen}
    from rich.console import Console

    with reporting(Console(stderr=True)):  # the calibration's progress line
        cal, _ = run_stage(run, "calibration", lambda: calibrate_envs(
            syn, base_policy, seed=args.seed, seeds=args.seeds, samples=args.samples, env_kwargs={},
            batch_size=gen.get("batch_size", 1), reference_seeds=CALIBRATION_REFERENCE_SEEDS, band=band,
            tune_rounds=TUNE_ROUNDS if args.tune else 0, set_knobs=knobs), Calibration,
            settings=settings, after=("synthesis",))
    for e in cal.envs:
        ref = e.get("reference_mean_reward")
        knob_note = f", knobs {e['difficulty']}" if e.get("difficulty") else ""
        console.print(f"{e['env_id']}: {doc['policy']} mean reward {e['mean_reward']:.2f}, success "
                      f"{e['success_rate']:.2f}; reference solution {'–' if ref is None else format(ref, '.2f')}"
                      f"{knob_note}" + ("" if "in_band" not in e else
                                        f" ({'inside' if e['in_band'] else 'outside'} the 20-60% band)"),
                      highlight=False, markup=False)
    console.print(f"next: trace-gym sft --run {args.run}  (or trace-gym train --run {args.run})", highlight=False)
    return 0


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
