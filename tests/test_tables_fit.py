"""Tables fit an 80-column terminal without cutting the names a user needs."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from trace_gym.render import fit_table

LONG_IDS = ["trace/demo-cap-refund-policy-v0", "trace/demo-cap-precondition-verification-v0"]


def _render(renderable) -> str:
    con = Console(width=80, record=True, color_system=None)
    con.print(renderable)
    return con.export_text()


def _assert_fits(text: str, names: list[str]) -> None:
    assert "…" not in text, text
    assert max(len(line) for line in text.splitlines()) <= 80
    for name in names:
        assert name in text, f"{name!r} is not shown whole:\n{text}"


def test_fit_table_keeps_named_columns_whole_and_never_cuts():
    t = Table()
    t.add_column("capability")
    t.add_column("notes")
    t.add_row("precondition-verification-of-every-flight", "x " * 120 + "averyveryverylongwordthatcannotwrapanywhereatall" * 2)
    text = _render(fit_table(t, "capability"))
    _assert_fits(text, ["precondition-verification-of-every-flight"])
    without = Table()
    without.add_column("capability")
    without.add_column("notes")
    without.add_row("precondition-verification-of-every-flight", "x " * 120 + "averyveryverylongwordthatcannotwrapanywhereatall" * 2)
    assert "…" in _render(without)  # what rich does by default: the check above can fail


def test_demo_summary_table_fits_80_columns():
    from trace_gym.demo.runner import summary_table

    stages = [
        ("1. base rollouts", "24 episodes; smollm2 passed 0/4, scripted passed 9/20"),
        ("2. analysis", "2 selected: refund-policy, precondition-verification"),
        ("3. synthesis + calibration", f"{LONG_IDS[0]} (smollm2 0.25), {LONG_IDS[1]} (smollm2 0.00)"),
        ("4. training (GRPO + LoRA)", "refund-policy (4 steps, reward 0.1→0.3), precondition-verification (4 steps, reward 0→0)"),
        ("5. routing", "accuracy 3/4 = 0.75 (index: {'refund-policy': 6, 'none': 3})"),
        ("6. evaluation", "base: mean reward 0.000, pass^1 0.000; routed: mean reward 0.000, pass^1 0.000"),
    ]
    summary = {"config": {"model": "smollm2", "target": "trace/tau2-retail-v0"},
               "stages": [{"title": t, "headline": h, "seconds": 1234.5, "cpu_seconds": 2345.6, "resumed": False,
                           "artifacts": ["runs/demo/x"]} for t, h in stages],
               "verdict": "no improvement on the held-out tasks (base 0.000 → routed 0.000 mean reward)"}
    _assert_fits(_render(summary_table(summary)), LONG_IDS + ["refund-policy", "precondition-verification", "1234 (2346)"])


def test_envs_table_fits_80_columns():
    import trace_gym  # noqa: F401
    from trace_gym.cli.envs import envs_table
    from trace_gym.registration import env_records

    rows = env_records()
    _assert_fits(_render(envs_table(rows)), [r["id"] for r in rows] + ["capability", "toolsandbox"])


def _pass(v: float) -> dict:
    return {"value": v, "low": max(0.0, v - 0.25), "high": min(1.0, v + 0.25)}


def test_eval_tables_fit_80_columns():
    from trace_gym.eval.report import comparison_table, report_table

    ks = {str(k): _pass(0.5) for k in (1, 2, 3, 4)}
    rep = {"policy": "routed:adapters/cap-0-precondition-verification", "env_id": "trace/tau2-retail-v0", "n_tasks": 4,
           "trials": 4, "mean_reward": 0.5, "pass_hat_k": ks, "rollouts": 16, "wall_s": 12.0,
           "groups": {"insufficient_information_multiple_user_turn": {"n_tasks": 4, "mean_reward": 0.5, "perfect": 2,
                                                                      "pass_hat_k": ks}}}
    _assert_fits(_render(report_table(rep)), ["insufficient_information_multiple_user_turn"])
    _assert_fits(_render(comparison_table([rep, {**rep, "policy": "base"}])),
                 ["routed:adapters/cap-0-precondition-verification"])


def test_demo_stage_tables_fit_80_columns(tmp_path):
    from trace_gym.demo.config import DemoConfig
    from trace_gym.demo.stages import Context, show
    from trace_gym.pipeline.stages import Rollouts, Synthesis

    con = Console(width=80, record=True, color_system=None)
    ctx = Context(DemoConfig(out=tmp_path, target="trace/tau2-retail-v0", model="tiny"), con)
    agents = {"flawed-scripted:skip-confirmation-before-write": {"episodes": 4, "passed": 0}, "tiny": {"episodes": 2, "passed": 0}}
    show(ctx, "rollouts", Rollouts(str(tmp_path / "r.jsonl"), 6, 0, agents))
    show(ctx, "synthesis", Synthesis([{"capability": "precondition-verification", "status": "template",
                                       "spec_id": "demo-cap-precondition-verification", "template": "airline-cancel",
                                       "reasons": []}]))
    _assert_fits(con.export_text(), list(agents) + ["precondition-verification", "demo-cap-precondition-verification",
                                                     "template", "airline-cancel"])


def test_compare_table_fits_80_columns():
    from trace_gym.compare.report import LABELS, rich_table

    def method(name):
        return {"rollouts": 1280, "budget": 1280, "train_wall_s": 1234.0, "note": "x",
                "eval": {"mean_reward": 0.25, "pass_hat_k": {"1": _pass(0.25), "4": _pass(0.1)}, "wall_s": 99.0,
                         "n_tasks": 20, "trials": 4}}

    doc = {"target": "trace/tau2-retail-v0", "budget": 1280, "methods": {m: method(m) for m in LABELS}}
    _assert_fits(_render(rich_table(doc)), list(LABELS.values()))


def test_analysis_capabilities_table_fits_80_columns():
    from trace_gym.analysis.report import capabilities_table

    names = ["information-communication", "precondition-verification", "confirmation-before-write"]
    doc = {"thresholds": {"rho": 0.1, "delta": 0.2, "k": 8}, "runs": 10, "inputs": {"n_failed": 120, "n_passed": 0},
           "capabilities": [{"capability": n, "selected": i == 0, "runs_passed": 10 - i, "n_runs": 10, "mean_coverage": 0.5,
                             "mean_gap": -0.25, "per_run": [{"er_minus": 0.5, "er_plus": 0.25, "lacking_failed": 3}] * 10}
                            for i, n in enumerate(names)]}
    na = {**doc["capabilities"][1], "capability": "refund-policy-compliance", "selected": False,
          "per_run": [{"er_minus": 0.0, "er_plus": 0.0, "lacking_failed": 0, "present_failed": 0}] * 10}
    doc["capabilities"].append(na)  # applies to no trajectory (another domain's capability): left out
    text = _render(capabilities_table(doc))
    _assert_fits(text, names + ["selected", "10/10", "-0.25"])
    assert "refund-policy-compliance" not in text and "1 capabilities that apply to none" in text


GROUPS = ["answerable", "canonicalization", "insufficient_information", "multiple_tool_call", "multiple_user_turn",
          "single_tool_call", "single_user_turn", "state_dependency"]


def _graded_eval(offset: float) -> dict:
    """A graded evaluation of 24 tasks over ToolSandbox's groups, its scores attached, as compare stores it."""
    from trace_gym.eval.scores import attach_scores

    tasks = [f"task-{i}" for i in range(24)]
    rewards = {t: [round((i * 7 % 10) / 10 * (1 - offset) + offset * (i % 2), 3)] for i, t in enumerate(tasks)}
    doc = {"rewards": rewards, "task_groups": {t: [GROUPS[i % 8], GROUPS[(i + 3) % 8]] for i, t in enumerate(tasks)},
           "ended": {t: [i % 3 > 0] for i, t in enumerate(tasks)},
           "refusal_floor": {"rewards": {t: float(i % 8 == 2) for i, t in enumerate(tasks)}},
           "mean_reward": 0.4, "pass_hat_k": {"1": _pass(0.3125)}, "n_tasks": 24, "trials": 1, "wall_s": 718.0}
    return attach_scores(doc)


def _ci_lines(text: str, value: float, low: float, high: float, signed: bool = False) -> None:
    """The interval is shown over three lines, each whole: the value, "[low," and "high]"."""
    s = "+" if signed else ""
    for part in (f"{value:{s}.3f}", f"[{low:{s}.2f},", f"{high:{s}.2f}]"):
        assert any(line.split() and part in line.split() for line in text.splitlines()), f"{part!r} not whole:\n{text}"


def test_ci_cell_is_three_lines_then_notes():
    from trace_gym.render import ci_cell

    assert ci_cell(0.38, 0.27, 0.49) == "0.380\n[0.27,\n0.49]"
    assert ci_cell(0.026, 0.002, 0.057, "4/1/37", signed=True) == "+0.026\n[+0.00,\n+0.06]\n4/1/37"
    assert ci_cell(-0.008, -0.021, 0.002, signed=True).splitlines()[1:] == ["[-0.02,", "+0.00]"]


def _compare_doc(methods=None) -> dict:
    from trace_gym.compare.report import LABELS

    methods = methods or list(LABELS)
    return {"target": "trace/toolsandbox-v0", "budget": 168,
            "methods": {m: {"rollouts": 168, "budget": 168, "train_wall_s": 5436.0, "note": "x",
                            "eval": _graded_eval(i / 10)} for i, m in enumerate(methods)}}


def test_compare_method_table_shows_each_interval_over_three_lines_at_80_columns():
    from trace_gym.compare.report import LABELS, rich_table

    doc = _compare_doc()
    text = _render(rich_table(doc))
    _assert_fits(text, list(LABELS.values()) + ["rollouts", "train s", "eval s"])
    _ci_lines(text, 0.3125, 0.0625, 0.5625)  # pass^1
    for m in doc["methods"].values():
        mean = m["eval"]["scores"]["overall"]["mean"]
        _ci_lines(text, mean["value"], mean["low"], mean["high"])


def test_compare_per_group_tables_fit_80_columns_with_every_interval():
    from trace_gym.compare.report import rich_paired_table, rich_scores_table
    from trace_gym.eval.scores import paired_scores

    doc = _compare_doc()
    text = _render(rich_scores_table(doc))
    _assert_fits(text, GROUPS + ["overall", "base", "GRPO", "GEPA", "TRACE", "single", "adapter", "floor"])
    for m in doc["methods"].values():
        for sc in m["eval"]["scores"]["groups"].values():
            _ci_lines(text, sc["mean"]["value"], sc["mean"]["low"], sc["mean"]["high"])
    text = _render(rich_paired_table(doc))
    _assert_fits(text, GROUPS + ["overall", "GRPO", "GEPA", "TRACE", "single", "adapter"])
    paired = paired_scores([{**m["eval"], "spec": k} for k, m in doc["methods"].items()])
    for d in paired.values():
        for g in [*d["groups"].values(), d["overall"]]:
            _ci_lines(text, g["value"], g["low"], g["high"], signed=True)
            assert f"{g['wins']}/{g['losses']}/{g['ties']}" in text


def test_trace_vs_baselines_prints_the_same_tables():
    """benchmarks/trace_vs_baselines.py prints compare's terminal tables, not tables of its own."""
    from pathlib import Path

    src = (Path(__file__).resolve().parents[1] / "benchmarks" / "trace_vs_baselines.py").read_text(encoding="utf-8")
    assert "from trace_gym.compare.report import rich_paired_table, rich_scores_table, rich_table" in src
    assert "Table(" not in src


def test_demo_and_eval_per_group_tables_fit_80_columns():
    from trace_gym.demo.runner import scores_rich_table
    from trace_gym.eval.report import paired_difference_table

    reports = [{**_graded_eval(i / 10), "spec": name, "policy": name}
               for i, name in enumerate(["base", "routed", "adapter:cap-0-precondition-verification"])]
    text = _render(scores_rich_table(reports))
    _assert_fits(text, GROUPS + ["overall", "base", "routed", "refusal floor"])
    for rep in reports:
        for sc in [*rep["scores"]["groups"].values(), rep["scores"]["overall"]]:
            _ci_lines(text, sc["mean"]["value"], sc["mean"]["low"], sc["mean"]["high"])
    text = _render(paired_difference_table(reports))
    _assert_fits(text, GROUPS + ["overall"])
    assert "[" in text and "]" in text
