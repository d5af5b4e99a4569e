"""Pooling a comparison and its swap: one report over every held-out task."""

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from trace_gym.compare.pool import pool_runs, write_pooled
from trace_gym.eval.metrics import paired_difference


def _doc(tasks, base, trace, *, target="trace/toolsandbox-v0", budget=168, groups=None, methods=("base", "trace")):
    groups = groups or {t: ["answerable"] for t in tasks}
    rewards = {"base": base, "trace": trace}

    def ev(m):
        return {"rewards": {t: [r] for t, r in zip(tasks, rewards[m], strict=True)},
                "ended": {t: [True] for t in tasks}, "task_groups": {t: groups[t] for t in tasks},
                "refusal_floor": {"rewards": {t: 0.0 for t in tasks}}}

    return {"target": target, "budget": budget, "seeds": {"eval_seed": 1000, "trials": 1},
            "methods": {m: {"eval": ev(m)} for m in methods}}


def test_a_run_and_its_swap_pool_into_one_paired_difference_over_every_task(tmp_path):
    a = _doc(["t1", "t2", "t3"], [0.0, 0.5, 1.0], [0.5, 0.5, 1.0],
             groups={"t1": ["answerable", "multiple_tool_call"], "t2": ["answerable"], "t3": ["insufficient_information"]})
    b = _doc(["u1", "u2"], [0.0, 0.2], [0.3, 0.0], groups={"u1": ["answerable", "multiple_tool_call"], "u2": ["answerable"]})
    pooled = pool_runs([a, b])
    assert pooled["runs"] == [["t1", "t2", "t3"], ["u1", "u2"]] and list(pooled["methods"]) == ["base", "trace"]
    flipped = {**b, "config": {"out": "elsewhere", "train_split": "test", "test_split": "train"},
               "methods": {"trace": b["methods"]["trace"], "base": b["methods"]["base"]}}
    assert list(pool_runs([{**a, "config": {"out": "here"}}, flipped])["methods"]) == ["base", "trace"]  # base first
    for i, d in enumerate((a, b)):
        (tmp_path / f"r{i}").mkdir()
        (tmp_path / f"r{i}" / "compare.json").write_text(json.dumps(d))
    out = write_pooled([tmp_path / "r0", tmp_path / "r1"], tmp_path / "pooled")
    md = (tmp_path / "pooled" / "pooled.md").read_text()
    # a compare.json given as a file (a committed result) pools like its folder
    again = write_pooled([tmp_path / "r0" / "compare.json", tmp_path / "r1"], tmp_path / "again")["markdown"]
    assert again.split("\n", 1)[1] == md.split("\n", 1)[1]  # all but the line naming the sources
    assert "3 + 2 = 5" in md and out["markdown"] == md
    # by hand: the differences over the five tasks are +0.5, 0, 0, +0.3, -0.2
    want = paired_difference({"t1": [0.0], "t2": [0.5], "t3": [1.0], "u1": [0.0], "u2": [0.2]},
                             {"t1": [0.5], "t2": [0.5], "t3": [1.0], "u1": [0.3], "u2": [0.0]}, seed=1000)
    assert want["value"] == pytest.approx(0.6 / 5) and (want["wins"], want["losses"], want["ties"]) == (2, 1, 2)
    cell = f"{want['value']:+.3f} [{want['low']:+.2f}, {want['high']:+.2f}] 2/1/2"
    assert f"| overall | {cell} |" in md
    # a scenario of two categories counts in both groups: multiple_tool_call holds t1 and u1
    mtc = paired_difference({"t1": [0.0], "u1": [0.0]}, {"t1": [0.5], "u1": [0.3]}, seed=1000)
    assert f"| multiple_tool_call | {mtc['value']:+.3f} [{mtc['low']:+.2f}, {mtc['high']:+.2f}] 2/0/0 |" in md
    assert json.loads((tmp_path / "pooled" / "pooled.json").read_text())["seed"] == 1000


def test_runs_that_cannot_be_pooled_say_what_differs(tmp_path):
    a = _doc(["t1"], [0.0], [1.0])
    with pytest.raises(ValueError, match="at least two runs"):
        pool_runs([a])
    with pytest.raises(ValueError, match="in two runs"):
        pool_runs([a, _doc(["t1", "t2"], [0.0, 0.0], [0.0, 0.0])])
    with pytest.raises(ValueError, match="differ in target"):
        pool_runs([a, _doc(["u1"], [0.0], [0.0], target="trace/tau2-retail-v0")])
    with pytest.raises(ValueError, match="differ in budget"):
        pool_runs([a, _doc(["u1"], [0.0], [0.0], budget=8)])
    with pytest.raises(ValueError, match="differ in model"):
        pool_runs([{**a, "config": {"model": "smollm2", "out": "x"}}, {**_doc(["u1"], [0.0], [0.0]),
                                                                       "config": {"model": "tiny", "out": "y"}}])
    odd = _doc(["u1", "u2"], [0.0, 0.0], [0.0, 0.0])
    del odd["methods"]["trace"]["eval"]["rewards"]["u2"]
    with pytest.raises(ValueError, match="trace played other held-out tasks than base"):
        pool_runs([a, odd])
    only_base = _doc(["u1"], [0.0], [0.0])
    del only_base["methods"]["trace"]
    with pytest.raises(ValueError, match="trace were evaluated in some runs only"):
        pool_runs([a, only_base])
    with pytest.raises(ValueError, match="holds no compare.json"):
        write_pooled([tmp_path, tmp_path], tmp_path / "out")
    assert not (tmp_path / "out").exists()


@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=2, max_size=12), st.integers(1, 11))
def test_pooling_is_the_paired_difference_of_the_joined_tasks(pairs, cut):
    cut = min(cut, len(pairs) - 1)
    tasks = [f"t{i}" for i in range(len(pairs))]
    base, trace = [p[0] for p in pairs], [p[1] for p in pairs]
    pooled = pool_runs([_doc(tasks[:cut], base[:cut], trace[:cut]), _doc(tasks[cut:], base[cut:], trace[cut:])])
    ev = pooled["methods"]
    got = paired_difference(ev["base"]["rewards"], ev["trace"]["rewards"], seed=3)
    want = paired_difference({t: [b] for t, b in zip(tasks, base, strict=True)}, {t: [r] for t, r in zip(tasks, trace, strict=True)}, seed=3)
    assert got == want
    assert np.isclose(got["value"], np.mean(np.array(trace) - np.array(base)))



def test_trace_is_set_against_each_baseline_on_the_same_tasks(tmp_path):
    """pooled.md carries TRACE − GRPO and TRACE − GEPA (paired, per group and overall) when they were evaluated."""
    from trace_gym.compare.pool import versus_table

    tasks = ["t1", "t2", "u1", "u2"]
    groups = {"t1": ["answerable"], "t2": ["insufficient_information"], "u1": ["answerable"], "u2": ["answerable"]}
    scores = {"base": [0.0, 1.0, 0.0, 0.2], "grpo": [0.1, 1.0, 0.0, 0.2], "gepa": [0.0, 0.5, 0.4, 0.2],
              "trace": [0.5, 1.0, 0.3, 0.0]}

    def doc(part):
        return {"target": "trace/toolsandbox-v0", "budget": 168, "seeds": {"eval_seed": 1000, "trials": 1},
                "methods": {m: {"eval": {"rewards": {t: [scores[m][tasks.index(t)]] for t in part},
                                         "ended": {t: [True] for t in part}, "task_groups": {t: groups[t] for t in part}}}
                            for m in scores}}

    for i, part in enumerate((tasks[:2], tasks[2:])):
        (tmp_path / f"r{i}").mkdir()
        (tmp_path / f"r{i}" / "compare.json").write_text(json.dumps(doc(part)))
    md = write_pooled([tmp_path / "r0", tmp_path / "r1"], tmp_path / "pooled")["markdown"]
    pooled = json.loads((tmp_path / "pooled" / "pooled.json").read_text())
    rows = versus_table(pooled["methods"], seed=1000)
    assert rows[0] == ["group", "TRACE (routed) − GRPO on target", "TRACE (routed) − GEPA"]
    for col, other in ((1, "grpo"), (2, "gepa")):
        want = paired_difference(pooled["methods"][other]["rewards"], pooled["methods"]["trace"]["rewards"], seed=1000)
        assert rows[-1][0] == "overall" and rows[-1][col].startswith(f"{want['value']:+.3f} [{want['low']:+.2f}, ")
        ans = paired_difference(pooled["methods"][other]["rewards"], pooled["methods"]["trace"]["rewards"],
                                ["t1", "u1", "u2"], seed=1000)
        assert rows[1][0] == "answerable" and rows[1][col].endswith(f"{ans['wins']}/{ans['losses']}/{ans['ties']}")
    assert "TRACE against each baseline" in md and "| overall | " + rows[-1][1] in md
    assert versus_table({"base": pooled["methods"]["base"], "trace": pooled["methods"]["trace"]}) == []
    assert versus_table({"base": pooled["methods"]["base"]}) == []
