"""ToolSandbox as a TRACE target: its held-out split, the run's success threshold, and graded scores per category."""

from __future__ import annotations

from collections import Counter

import pytest

from trace_gym.core.tasks import UnknownSplitError, task_groups, task_source_for
from trace_gym.pipeline import Target, bootstrap_mean, graded_scores, scores_table
from trace_gym.toolsandbox.tasks import category_folds

ENV = "trace/toolsandbox-v0"


def test_the_two_folds_cut_every_category_in_two_and_never_overlap():
    src = task_source_for(ENV)
    assert src.splits() == ("base", "train", "test", "fold_a", "fold_b") and src.default_split() == "base"
    assert src.domain == "toolsandbox"
    every, train, test = src.task_ids(), src.task_ids("train"), src.task_ids("test")
    assert (train, test) == (src.task_ids("fold_a"), src.task_ids("fold_b"))
    assert len(every) == 129 and not set(train) & set(test) and set(train) | set(test) == set(every)
    assert abs(len(train) - len(test)) <= 1
    assert train == [t for t in every if t in set(train)]  # pool order kept
    for fold in (train, test):  # every category on both sides, about half of it
        n_all = Counter(g for t in every for g in task_groups(src, t))
        n_fold = Counter(g for t in fold for g in task_groups(src, t))
        assert set(n_fold) == set(n_all) and len(n_all) == 8  # 7 categories and "answerable"
        for g, n in n_all.items():
            assert abs(n_fold[g] - n / 2) <= 3, (g, n_fold[g], n)
    non_refusal = [t for t in test if "insufficient_information" not in task_groups(src, t)]
    assert non_refusal == [t for t in test if "answerable" in task_groups(src, t)]
    assert sum("state_dependency" in task_groups(src, t) for t in non_refusal) >= 10
    assert src.task_ids("test") == test  # fixed: every run holds out the same scenarios
    with pytest.raises(UnknownSplitError, match="fold_a"):
        src.task_ids("dev")


def test_a_scenario_counts_in_every_category_it_carries():
    src = task_source_for(ENV)
    multi = [t for t in src.task_ids() if len(set(task_groups(src, t)) - {"answerable"}) >= 3]
    assert multi
    t = multi[0]
    assert src.group(t) in task_groups(src, t) and "no_distraction_tools" not in task_groups(src, t)


def test_the_folds_are_seeded_and_follow_the_pool():
    names = [f"s{i}" for i in range(11)]
    cats = lambda n: ("a",) if int(n[1:]) < 5 else ("a", "b") if int(n[1:]) < 8 else ("c",)  # noqa: E731
    a, b = category_folds(names, cats, seed=0)
    assert category_folds(names, cats, seed=0) == (a, b) and sorted(a + b) == sorted(names)
    assert abs(len(a) - len(b)) <= 1
    for key in {cats(n) for n in names}:
        na, nb = sum(cats(n) == key for n in a), sum(cats(n) == key for n in b)
        assert abs(na - nb) <= 1
    assert any(category_folds(names, cats, seed=s)[1] != b for s in range(1, 6))
    pool = task_source_for(ENV, {"scenarios": ["wifi_off", "cellular_off", "get_wifi"]})
    assert set(pool.task_ids("train")) | set(pool.task_ids("test")) == {"wifi_off", "cellular_off", "get_wifi"}


def test_a_run_may_count_a_graded_reward_as_success():
    assert Target(ENV).threshold == 1.0  # the env's own: a perfect similarity
    assert Target(ENV, success=0.7).threshold == 0.7 and Target(ENV, success=0.7).domain == "toolsandbox"


def test_graded_scores_per_group_with_intervals_and_the_floor():
    report = {"rewards": {"a": [1.0, 0.5], "b": [0.0, 0.0], "c": [1.0, 1.0]},
              "refusal_floor": {"rewards": {"a": 0.0, "b": 1.0, "c": 0.0}}}
    group = {"a": "x", "b": "x", "c": "y"}.get
    s = graded_scores(report, group)
    assert s["overall"]["episodes"] == 6 and s["overall"]["perfect"] == 3
    assert s["overall"]["mean"]["value"] == pytest.approx(3.5 / 6)
    assert s["groups"]["x"]["perfect"] == 1 and s["groups"]["x"]["mean"]["value"] == pytest.approx(1.5 / 4)
    assert s["groups"]["x"]["floor"] == {"mean": 0.5, "perfect": 1, "n_tasks": 2}
    lo, hi = s["overall"]["mean"]["low"], s["overall"]["mean"]["high"]
    assert 0.0 <= lo < s["overall"]["mean"]["value"] < hi <= 1.0
    assert s["groups"]["y"]["mean"] == {"value": 1.0, "low": 1.0, "high": 1.0}
    rows = scores_table({"base": s, "routed": s}, "group")
    assert rows[0] == ["group", "base", "routed", "refusal floor"] and [r[0] for r in rows[1:]] == ["x", "y", "overall"]
    assert rows[-1][1].endswith("3/6") and rows[-1][-1] == "0.333 · 1/3"
    assert bootstrap_mean({}) == {"value": 0.0, "low": 0.0, "high": 0.0}


def test_compare_learns_on_one_fold_and_evaluates_on_the_other_or_says_which_split_is_missing():
    from trace_gym.compare.methods import target_splits

    train, test, how = target_splits(ENV, seed=0, train_split="fold_b", test_split="fold_a")
    src = task_source_for(ENV)
    assert set(train) == set(src.task_ids("fold_b")) and set(test) == set(src.task_ids("fold_a")) and "fold_b" in how
    with pytest.raises(UnknownSplitError, match=r"no split 'fold_z'.*fold_a"):
        target_splits(ENV, seed=0, train_split="fold_z")
    with pytest.raises(ValueError, match="share tasks"):
        target_splits(ENV, seed=0, train_split="base", test_split="test")
