"""Token picking: top-p draws only from the nucleus, with its probabilities, on either path."""

from __future__ import annotations

from unittest import mock

import pytest

from tests.extras import need

torch = need("torch")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import trace_gym.policies.decoding as decoding  # noqa: E402
from trace_gym.policies.decoding import pick_tokens  # noqa: E402


def _nucleus(row, top_p, temperature):
    """The reference nucleus of one row: every token whose strictly more likely tokens hold less than ``top_p``."""
    probs = torch.softmax(row / temperature, dim=-1)
    return {int(i) for i in range(len(probs)) if float(probs[probs > probs[i]].sum()) < top_p}


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), rows=st.integers(1, 4), vocab=st.integers(2, 400),
       top_p=st.floats(0.05, 0.99), candidates=st.sampled_from([1, 3, 256]))
def test_top_p_draws_stay_in_the_nucleus_on_both_paths(seed, rows, vocab, top_p, candidates):
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(rows, vocab, generator=gen) * 3
    gens = [torch.Generator().manual_seed(seed + i) for i in range(rows)]
    # 1 and 3 candidates: the whole-vocabulary sort nearly always; 256: the short path
    with mock.patch.object(decoding, "NUCLEUS_CANDIDATES", candidates):
        for _ in range(5):
            picks = pick_tokens(logits, temperature=0.7, top_p=top_p, generators=gens)
            assert picks.shape == (rows,)
            for r in range(rows):
                assert int(picks[r]) in _nucleus(logits[r], top_p, 0.7)


@pytest.mark.parametrize("candidates", [2, 256])
def test_top_p_draws_follow_the_renormalised_nucleus(monkeypatch, candidates):
    monkeypatch.setattr(decoding, "NUCLEUS_CANDIDATES", candidates)
    logits = torch.log(torch.tensor([[0.40, 0.25, 0.15, 0.10, 0.06, 0.04]]))
    gen = [torch.Generator().manual_seed(0)]
    draws = torch.stack([pick_tokens(logits, top_p=0.75, generators=gen) for _ in range(6000)])[:, 0]
    freq = torch.bincount(draws, minlength=6).float() / len(draws)
    expected = torch.tensor([0.40, 0.25, 0.15, 0, 0, 0]) / 0.80  # 0.40 + 0.25 < 0.75: the third is still in
    assert (freq - expected).abs().max() < 0.02


def test_the_same_generators_give_the_same_draws():
    logits = torch.randn(3, 1000, generator=torch.Generator().manual_seed(1))
    a = pick_tokens(logits, top_p=0.9, temperature=0.8, generators=[torch.Generator().manual_seed(s) for s in (1, 2, 3)])
    b = pick_tokens(logits, top_p=0.9, temperature=0.8, generators=[torch.Generator().manual_seed(s) for s in (1, 2, 3)])
    assert torch.equal(a, b)
