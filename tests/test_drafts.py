"""Prompt-lookup drafting (``Drafts``): checking drafts changes no token, whatever the drafts are.

A made-up model (the next token a fixed function of the tokens so far) is decoded plainly, one
token a step, and with ``Drafts``; the two must produce the same tokens for every row, and a row
whose text repeats earlier text must take several tokens in one step.  The llama.cpp and
transformers loops that use ``Drafts`` are tested against real models in their own files.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from trace_gym.policies.decoding import Drafts


def _model(vocab: int, salt: int):
    """The next token after ``seq``: a hash of its last three tokens (so text repeats, as tool calls do)."""

    def nxt(seq: list[int]) -> int:
        return hash((salt, *seq[-3:])) % vocab

    return nxt


def _one_hot(tok: int, vocab: int) -> np.ndarray:
    row = np.zeros(vocab, dtype=np.float32)
    row[tok] = 1.0
    return row


def _plain(rows, limits, nxt, stop_token):
    out = []
    for row, limit in zip(rows, limits, strict=True):
        seq, produced = list(row), []
        while True:
            tok = nxt(seq)
            produced.append(tok)
            seq.append(tok)
            if tok == stop_token or len(produced) >= limit:
                break
        out.append(produced)
    return out


def _drafted(rows, limits, nxt, stop_token, lookahead, cost):
    vocab = 1 + max(stop_token, max(max(r) for r in rows))
    drafts = Drafts(rows, lookahead, cost)
    seqs = [list(r) for r in rows]
    produced = [[] for _ in rows]
    finished = [False] * len(rows)
    steps = 0

    def emit(i, tok):
        drafts.append(i, tok)
        produced[i].append(tok)
        seqs[i].append(tok)
        finished[i] = tok == stop_token or len(produced[i]) >= limits[i]
        return finished[i]

    def choose(logits, keys):
        return [int(np.argmax(row)) for row in logits]

    for i in range(len(rows)):  # the prefill's token
        emit(i, nxt(seqs[i]))
    while not all(finished):
        live = [i for i in range(len(rows)) if not finished[i]]
        ahead = drafts.propose(live, [limits[i] - len(produced[i]) - 1 for i in live])
        assert all(len(d) <= min(lookahead, limits[i] - len(produced[i]) - 1) for i, d in zip(live, ahead, strict=True))
        # the model's logits after the fed token and each draft, as one wide step computes them
        fed_logits = []
        for i, d in zip(live, ahead, strict=True):
            seq, cols = list(seqs[i]), []
            for tok in [None, *d]:
                if tok is not None:
                    seq.append(tok)
                cols.append(_one_hot(nxt(seq), vocab))
            fed_logits.append(cols)
        drafts.check(live, lambda j, ks, fl=fed_logits: np.stack([fl[k][j] for k in ks]), ahead, choose, emit)
        steps += 1
    return produced, steps, drafts


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), n_rows=st.integers(1, 4), vocab=st.integers(3, 12), lookahead=st.integers(0, 8),
       cost=st.floats(0.0, 0.5), limit=st.integers(1, 40))
def test_drafts_change_no_token(seed, n_rows, vocab, lookahead, cost, limit):
    rng = np.random.default_rng(seed)
    rows = [[int(t) for t in rng.integers(0, vocab, int(rng.integers(1, 30)))] for _ in range(n_rows)]
    limits = [int(rng.integers(1, limit + 1)) for _ in rows]
    nxt, stop_token = _model(vocab, seed), vocab  # a token the model never gives: rows run to their limits
    got, _, drafts = _drafted(rows, limits, nxt, stop_token, lookahead, cost)
    assert got == _plain(rows, limits, nxt, stop_token)
    assert 0 <= drafts.accepted <= drafts.drafted
    if lookahead == 0:
        assert drafts.drafted == 0


def test_repeated_text_takes_several_tokens_a_step():
    row = [1, 2, 3, 4, 5, 6, 7, 1, 2, 3]  # the model (the next token after t is t + 1) repeats the row's text
    got, steps, drafts = _drafted([row], [30], lambda seq: seq[-1] % 7 + 1, 0, 8, 0.05)
    plain, plain_steps, _ = _drafted([row], [30], lambda seq: seq[-1] % 7 + 1, 0, 0, 0.05)
    assert got == plain
    assert steps < plain_steps / 3 and drafts.accepted > 20


def test_a_finished_row_keeps_no_drafts_after_its_last_token():
    """The stop token ends a row even where its drafts would have gone on."""
    row = [1, 2, 3, 0, 1, 2, 3]

    def nxt(seq):  # 1 2 3 ... then the stop token 0
        return 0 if len(seq) >= 9 else seq[-1] % 3 + 1

    got, _, _ = _drafted([row], [20], nxt, 0, 8, 0.0)
    assert got == [[1, 2, 0]]
