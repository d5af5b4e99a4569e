"""The refusal floor beside ToolSandbox numbers, and leaving out the groups a refusal already wins."""

from __future__ import annotations

import json

import pytest

import trace_gym  # noqa: F401  (registers trace/*)
from trace_gym.core.tasks import task_source_for
from trace_gym.eval.floor import REFUSAL, RefusalPolicy, refusal_credited_groups, refusal_floor
from trace_gym.eval.harness import evaluate
from trace_gym.eval.report import comparison_table, report_table
from trace_gym.policies.scripted import ScriptedPolicy

TS = "trace/toolsandbox-v0"


def _tasks_by_group(per_group: int = 2) -> list[str]:
    src = task_source_for(TS)
    out, seen = [], {}
    for t in src.task_ids():
        g = src.group(t)
        if seen.get(g, 0) < per_group:
            seen[g] = seen.get(g, 0) + 1
            out.append(t)
    return out


def test_refusal_policy_and_floor_per_task():
    assert RefusalPolicy().act([], []) == REFUSAL
    tasks = _tasks_by_group()
    floor, played = refusal_floor(TS, tasks)
    assert played == len(tasks) and set(floor) == set(tasks)
    src = task_source_for(TS)
    insufficient = [t for t in tasks if src.group(t) == "insufficient_information"]
    others = [t for t in tasks if src.group(t) != "insufficient_information"]
    assert insufficient and all(floor[t] == 1.0 for t in insufficient)  # refusing wins these outright
    assert all(floor[t] < 1.0 for t in others)


def test_evaluate_reports_the_floor_per_group_for_toolsandbox(tmp_path):
    tasks = _tasks_by_group()
    pol = ScriptedPolicy(lambda m, t: "Let me think about that.", policy_id="talker")
    rep = evaluate(TS, pol, tasks, 1, store=tmp_path / "e.jsonl")
    doc = rep.to_dict()
    floor = doc["refusal_floor"]
    assert floor["policy"] == "refusal-floor" and floor["rollouts"] == len(tasks) and rep.rollouts == len(tasks)
    assert set(floor["groups"]) == set(doc["groups"])
    assert floor["groups"]["insufficient_information"]["mean_reward"] == 1.0
    assert floor["groups"]["insufficient_information"]["perfect"] == 2
    # resuming plays neither the policy nor the floor again
    again = evaluate(TS, pol, tasks, 1, store=tmp_path / "e.jsonl")
    assert again.rollouts == 0 and again.floor_rollouts == 0 and again.floor == rep.floor
    # the tables show it beside the numbers
    from rich.console import Console

    console = Console(record=True, width=200)
    console.print(report_table(doc))
    console.print(comparison_table([doc]))
    text = console.export_text()
    assert text.count("refusal floor") >= 2 and "1.00·2" in text
    json.dumps(doc)  # the report stays JSON


def test_no_floor_where_the_target_does_not_ask(tmp_path, tau2_data):
    pol = ScriptedPolicy(lambda m, t: "Hello.", policy_id="hello")
    rep = evaluate("trace/tau2-mock-v0", pol, task_source_for("trace/tau2-mock-v0").task_ids()[:1], 1)
    assert "refusal_floor" not in rep.to_dict()
    forced = evaluate("trace/tau2-mock-v0", pol, task_source_for("trace/tau2-mock-v0").task_ids()[:1], 1, floor=True)
    assert "refusal_floor" in forced.to_dict()


def test_exclude_the_groups_refusal_already_wins(tmp_path):
    tasks = _tasks_by_group()
    groups = refusal_credited_groups(TS, tasks)
    assert groups == ["insufficient_information"]
    pol = ScriptedPolicy(lambda m, t: REFUSAL, policy_id="refuser")
    full = evaluate(TS, pol, tasks, 1)
    kept = evaluate(TS, pol, tasks, 1, exclude_groups=groups)
    assert "insufficient_information" in full.groups and "insufficient_information" not in kept.groups
    assert kept.to_dict()["excluded_groups"] == {"insufficient_information": 2}
    assert kept.mean_reward() < full.mean_reward()  # the refuser's number without free credit
    with pytest.raises(ValueError, match="leaves no task"):
        evaluate(TS, pol, tasks[:1], 1, exclude_groups=[task_source_for(TS).group(tasks[0])])


def test_cli_eval_with_floor_and_exclusion(tmp_path):
    from trace_gym.cli import main

    script = tmp_path / "s.txt"
    script.write_text("I cannot help with that.\n")
    picked = _tasks_by_group(1)
    tasks = ",".join(picked)
    assert main(["eval", "--env", TS, "--policy", f"scripted:{script}", "--tasks", tasks, "--trials", "1",
                 "--out", str(tmp_path / "ev"), "--exclude-refusal-credited", "--batch-size", "1"]) == 0
    comp = json.loads((tmp_path / "ev" / "comparison.json").read_text())
    assert comp["excluded_groups"] == ["insufficient_information"]
    (rep,) = comp["reports"]
    assert "insufficient_information" not in rep["groups"] and rep["refusal_floor"]["n_tasks"] == len(picked) - 1
