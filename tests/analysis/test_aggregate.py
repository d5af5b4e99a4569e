import pytest
from hypothesis import given
from hypothesis import strategies as st

from trace_gym.analysis import Label, LabelRun, LabelValue, Thresholds, aggregate, run_stats

L, P, N = LabelValue.LACKING, LabelValue.PRESENT, LabelValue.NA


def _run(i, table):
    return LabelRun(i, 100 + i, [Label(t, c, v) for (t, c), v in table.items()])


def test_hand_computed_case():
    # 4 failed (f1..f4), 2 passed (p1, p2).
    rewards = {"f1": 0.0, "f2": 0.0, "f3": 0.0, "f4": 0.5, "p1": 1.0, "p2": 1.0}
    table = {
        ("f1", "A"): L, ("f2", "A"): L, ("f3", "A"): P, ("f4", "A"): N, ("p1", "A"): P, ("p2", "A"): L,
        ("f1", "B"): L, ("f2", "B"): N, ("f3", "B"): N, ("f4", "B"): N, ("p1", "B"): L, ("p2", "B"): N,
    }
    a, b = run_stats(_run(0, table), rewards, ["A", "B"])
    # A: Cov = 2/4; ER- = 2/3; ER+ = 1/2; gap = 1/6
    assert a.coverage == pytest.approx(0.5)
    assert a.er_minus == pytest.approx(2 / 3)
    assert a.er_plus == pytest.approx(0.5)
    assert a.gap == pytest.approx(1 / 6)
    # B: Cov = 1/4; ER- = 1; ER+ = 1; gap = 0
    assert (b.coverage, b.er_minus, b.er_plus, b.gap) == (0.25, 1.0, 1.0, 0.0)
    t = Thresholds(rho=0.1, delta=0.1, k=1)
    assert a.passes(t) and not b.passes(t)
    res = aggregate([_run(0, table)], rewards, ["A", "B"], t)
    assert res.selected == ["A"]
    assert aggregate([_run(0, table)], rewards, ["A", "B"], Thresholds(rho=0.1, delta=0.2, k=1)).selected == []


def test_k_of_n_and_ranking_by_mean_gap():
    rewards = {"f": 0.0, "p": 1.0}
    strong = {("f", "S"): L, ("p", "S"): P, ("f", "W"): L, ("p", "W"): N}
    weak = {("f", "S"): L, ("p", "S"): L, ("f", "W"): L, ("p", "W"): N}
    runs = [_run(0, strong), _run(1, strong), _run(2, weak)]
    res = aggregate(runs, rewards, ["W", "S"], Thresholds(rho=0.1, delta=0.2, k=2))
    # W: gap 1 in all runs (ER+ is 0 when never needed on passed); S: gap 1, 1, 0.
    assert res.selected == ["W", "S"]
    s = {x.capability: x for x in res.summaries}
    assert s["S"].runs_passed == 2 and s["W"].runs_passed == 3
    assert aggregate(runs, rewards, ["W", "S"], Thresholds(k=3, rho=0.1, delta=0.2)).selected == ["W"]


def test_bad_thresholds_and_no_runs():
    with pytest.raises(ValueError, match="rho"):
        Thresholds(rho=1.5)
    with pytest.raises(ValueError, match="k must"):
        Thresholds(k=0)
    with pytest.raises(ValueError, match="at least one"):
        aggregate([], {}, ["A"])


values = st.sampled_from([L, P, N])


@st.composite
def scenario(draw):
    n_traj = draw(st.integers(1, 8))
    rewards = {f"t{i}": draw(st.sampled_from([0.0, 0.5, 1.0])) for i in range(n_traj)}
    caps = ["A", "B", "C"]
    runs = [
        LabelRun(r, r, [Label(t, c, draw(values)) for t in rewards for c in caps])
        for r in range(draw(st.integers(1, 5)))
    ]
    return rewards, caps, runs


@given(scenario())
def test_gap_and_coverage_are_bounded(sc):
    rewards, caps, runs = sc
    for run in runs:
        for s in run_stats(run, rewards, caps):
            assert -1.0 <= s.gap <= 1.0
            assert 0.0 <= s.coverage <= 1.0


@given(scenario(), st.floats(0, 1), st.floats(0, 1), st.floats(-1, 1), st.floats(-1, 1), st.integers(1, 5), st.integers(1, 5))
def test_selection_is_monotone_in_thresholds(sc, r1, r2, d1, d2, k1, k2):
    rewards, caps, runs = sc
    lo = Thresholds(rho=min(r1, r2), delta=min(d1, d2), k=min(k1, k2))
    hi = Thresholds(rho=max(r1, r2), delta=max(d1, d2), k=max(k1, k2))
    assert set(aggregate(runs, rewards, caps, hi).selected) <= set(aggregate(runs, rewards, caps, lo).selected)
