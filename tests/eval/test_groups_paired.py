"""Report groups as ToolSandbox reports them (a scenario in every category it carries), the share of
episodes the agent ended, and paired differences between policies on the same tasks."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

import trace_gym  # noqa: F401  (registers trace/*)
from trace_gym.core.tasks import task_groups, task_source_for
from trace_gym.eval.harness import evaluate
from trace_gym.eval.metrics import paired_difference
from trace_gym.eval.report import paired_difference_table, report_table
from trace_gym.eval.scores import graded_scores, paired_scores, paired_table
from trace_gym.policies.scripted import ScriptedPolicy

TS = "trace/toolsandbox-v0"


def test_paired_difference_matches_a_hand_computation():
    first = {"a": [0.0, 0.5], "b": [1.0, 1.0], "c": [0.2, 0.2], "d": [0.0, 0.0]}
    second = {"a": [1.0, 1.0], "b": [0.5, 0.5], "c": [0.2, 0.2], "d": [0.25, 0.75], "only-second": [1.0]}
    d = paired_difference(first, second, n_boot=20000, seed=3)
    # per task: a +0.75, b -0.5, c 0, d +0.5 ("only-second" was not played by both)
    diffs = [0.75, -0.5, 0.0, 0.5]
    assert d["n_tasks"] == 4 and (d["wins"], d["losses"], d["ties"]) == (2, 1, 1)
    assert d["value"] == pytest.approx(sum(diffs) / 4)
    # the exact bootstrap distribution: all 4^4 resamples of the four tasks, equally likely
    means = np.array(sorted(np.mean(c) for c in itertools.product(diffs, repeat=4)))
    lo, hi = np.quantile(means, [0.025, 0.975])
    assert d["low"] == pytest.approx(lo, abs=0.03) and d["high"] == pytest.approx(hi, abs=0.03)
    assert d["low"] <= d["value"] <= d["high"]
    assert paired_difference(first, second, ["a"])["low"] == pytest.approx(0.75)  # one task: no spread
    assert paired_difference({}, second)["n_tasks"] == 0


def test_a_task_counts_in_every_group_it_belongs_to():
    report = {"rewards": {"a": [1.0], "b": [0.0], "c": [0.5]}, "ended": {"a": [True], "b": [False], "c": [True]},
              "task_groups": {"a": ["x", "y", "z"], "b": ["x"], "c": ["y"]}}
    s = graded_scores(report)
    assert set(s["groups"]) == {"x", "y", "z"}
    assert [s["groups"][g]["n_tasks"] for g in ("x", "y", "z")] == [2, 2, 1]  # "a" is in three groups
    assert s["overall"]["n_tasks"] == 3 and s["overall"]["perfect"] == 1
    assert s["overall"]["ended"] == pytest.approx(2 / 3) and s["groups"]["x"]["ended"] == 0.5


def test_paired_scores_per_group_against_the_first_report():
    base = {"spec": "base", "rewards": {"a": [0.0], "b": [0.5], "c": [0.0]}, "task_groups": {"a": ["x", "y"], "b": ["x"], "c": ["y"]}}
    new = {"spec": "new", "rewards": {"a": [1.0], "b": [0.5], "c": [0.25]}}
    p = paired_scores([base, new])
    assert p["new"]["vs"] == "base" and p["new"]["overall"]["wins"] == 2 and p["new"]["overall"]["ties"] == 1
    assert p["new"]["groups"]["x"]["value"] == pytest.approx(0.5) and p["new"]["groups"]["y"]["value"] == pytest.approx(0.625)
    rows = paired_table(p)
    assert rows[0] == ["group", "new − base"] and [r[0] for r in rows[1:]] == ["x", "y", "overall"]
    assert rows[-1][1].startswith("+0.417") and rows[-1][1].endswith("2/0/1")
    assert paired_scores([base]) == {} and paired_table({}) == []


def _three_category_scenarios() -> list[str]:
    src = task_source_for(TS)
    multi = [t for t in src.task_ids() if len(set(task_groups(src, t)) - {"answerable"}) >= 3]  # three categories
    return [multi[0], next(t for t in src.task_ids() if task_groups(src, t) == ("insufficient_information",))]


def test_evaluate_reports_toolsandbox_scenarios_in_each_of_their_categories(tmp_path):
    tasks = _three_category_scenarios()
    src = task_source_for(TS)
    talker = ScriptedPolicy(lambda m, t: "I cannot help with that, sorry.", policy_id="talker")
    rep = evaluate(TS, talker, tasks, 1, store=tmp_path / "talker.jsonl")
    doc = rep.to_dict()
    cats = task_groups(src, tasks[0])
    assert len(cats) >= 3 and all(tasks[0] in rep.groups[c] for c in cats)
    assert doc["task_groups"][tasks[0]] == sorted(cats)
    assert set(doc["scores"]["groups"]) == set(doc["groups"]) == set(cats) | {"insufficient_information"}
    assert doc["ended"] == {t: [True] for t in tasks}  # a message to the user, then the user ends the conversation
    assert doc["scores"]["overall"]["ended"] == 1.0
    looper = ScriptedPolicy(lambda m, t: '<tool_call>{"name": "get_wifi_status", "arguments": {}}</tool_call>',
                            policy_id="looper")
    other = evaluate(TS, looper, tasks, 1, store=tmp_path / "looper.jsonl").to_dict()
    assert other["scores"]["overall"]["ended"] == 0.0  # never answers: stopped by the message limit
    from rich.console import Console

    console = Console(record=True, width=80, color_system=None)
    console.print(report_table(doc))
    console.print(paired_difference_table([doc, other]))
    text = console.export_text()
    assert "state_dependency" in text or "canonicalization" in text
    assert "looper − talker" in text and "ended" in text
    assert max(len(line) for line in text.splitlines()) <= 80
    mean = doc["scores"]["groups"]["insufficient_information"]["mean"]
    assert f"{mean['value']:.3f} [{mean['low']:.2f}, {mean['high']:.2f}]" in text  # whole on one line at 80 columns
    assert "insufficient_information" in text and "perf" in text
    json.dumps(doc)
