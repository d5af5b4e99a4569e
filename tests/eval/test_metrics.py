import pytest
from hypothesis import given
from hypothesis import strategies as st

from trace_gym.eval import bootstrap_pass_hat_k, pass_hat_k, task_pass_hat_k


def test_hand_computed():
    # 4 trials, 2 successes: pass^1 = 0.5, pass^2 = C(2,2)/C(4,2) = 1/6
    assert task_pass_hat_k([1, 0, 1, 0], 1) == 0.5
    assert task_pass_hat_k([1, 0, 1, 0], 2) == pytest.approx(1 / 6)
    assert task_pass_hat_k([1, 0, 1, 0], 3) == 0.0
    assert pass_hat_k({"a": [1, 1], "b": [0, 1]}, 2) == pytest.approx(0.5)


def test_errors():
    with pytest.raises(ValueError, match="at least 3 trials"):
        task_pass_hat_k([1, 1], 3)
    with pytest.raises(ValueError, match="undefined"):
        pass_hat_k({}, 1)


@given(st.dictionaries(st.text(max_size=3), st.lists(st.booleans(), min_size=4, max_size=4), min_size=1, max_size=10))
def test_pass_hat_k_decreases_in_k_and_interval_brackets(results):
    vals = [pass_hat_k(results, k) for k in range(1, 5)]
    assert all(0 <= v <= 1 for v in vals)
    assert all(a >= b - 1e-12 for a, b in zip(vals, vals[1:], strict=False))
    ci = bootstrap_pass_hat_k(results, 1, n_boot=200, seed=1)
    assert ci.low - 1e-12 <= ci.value <= ci.high + 1e-12
    assert ci == bootstrap_pass_hat_k(results, 1, n_boot=200, seed=1)
