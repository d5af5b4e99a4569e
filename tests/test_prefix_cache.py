"""The one prefix KV cache: lookup, shared prefixes, namespaces, bounds, and both samplers going through it."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.extras import need, need_smollm2

torch = need("torch")
need("transformers")

from trace_gym.policies.hf import HFPolicy, tiny_test_model  # noqa: E402
from trace_gym.policies.prefix_cache import (  # noqa: E402
    PrefixKVCache,
    cache_argument,
    common_length,
    stack_prefixes,
)

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def tiny(one_torch_thread):
    need_smollm2()
    return tiny_test_model(seed=0)


def _kv(model, ids):
    """Reference keys/values of ``ids`` from one plain forward (positions from 0)."""
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids]), use_cache=True)
    return [(layer.keys, layer.values) for layer in out.get(cache_argument(model)).layers]


def _assert_kv(got, want):
    assert len(got) == len(want)
    for (k, v), (k_ref, v_ref) in zip(got, want, strict=True):
        torch.testing.assert_close(k, k_ref)
        torch.testing.assert_close(v, v_ref)


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_each_row_gets_its_longest_stored_or_shared_prefix_with_the_right_keys_and_values(tiny, data):
    model, _ = tiny
    min_tokens = data.draw(st.integers(1, 6), label="min_tokens")
    share_single = data.draw(st.booleans(), label="share_single")
    trunk = data.draw(st.lists(st.integers(5, 7), max_size=20), label="trunk")  # a small alphabet: rows share prefixes

    def row() -> list[int]:
        return trunk[: data.draw(st.integers(0, len(trunk)))] + data.draw(st.lists(st.integers(5, 9), min_size=1, max_size=8))

    cache = PrefixKVCache(min_tokens=min_tokens, max_entries=data.draw(st.integers(1, 4)), share_single=share_single)
    for _ in range(data.draw(st.integers(0, 4), label="stored")):
        ids = row()
        cache.namespace = data.draw(st.sampled_from(["a", "b"]))
        cache.store_rows(model, [ids], [_kv(model, ids)])
    cache.namespace = "a"
    query = [row() for _ in range(data.draw(st.integers(1, 3), label="rows"))]
    available = [e.ids for e in cache.entries.values() if e.namespace == "a"]
    shared = min(len(r) - 1 for r in query)
    for r in query[1:]:
        shared = min(shared, common_length(query[0], r))
    if not ((len(query) > 1 or share_single) and shared >= min_tokens):
        shared = 0
    before = dict(cache.stats)

    found = cache.row_prefixes(model, query, "cpu")

    for r, (n, layers) in zip(query, found, strict=True):
        best = max((min(common_length(ids, r), len(r) - 1) for ids in available), default=0)
        assert n == max(best if best >= min_tokens else 0, shared)  # other namespaces never count
        assert n < len(r)  # a row keeps a token of its own
        if n:
            _assert_kv(layers, [(k[:, :, :n], v[:, :, :n]) for k, v in _kv(model, r[:n])])
        else:
            assert layers is None
    assert len(cache) <= cache.max_entries
    assert cache.stats["reused_tokens"] - before["reused_tokens"] == sum(n for n, _ in found)
    assert cache.stats["prompt_tokens"] - before["prompt_tokens"] == sum(map(len, query))
    assert cache.stats["prefilled_tokens"] - before["prefilled_tokens"] <= shared  # only the shared prefix runs


def test_namespaces_older_turns_bound_and_clearing(tiny):
    model, _ = tiny
    x = list(range(100, 130))
    cache = PrefixKVCache(min_tokens=4, max_entries=3)
    cache.namespace = "a"
    cache.store_rows(model, [x[:20]], [_kv(model, x[:20])])
    cache.store_rows(model, [x], [_kv(model, x)])
    assert [e.ids for e in cache.entries.values()] == [x]  # the row's older turn is dropped
    cache.namespace = "b"
    assert cache.row_prefixes(model, [x + [5]], "cpu") == [(0, None)]  # entries of "a" are not seen from "b"
    cache.namespace = "a"
    [(n, layers)] = cache.row_prefixes(model, [x + [5]], "cpu")
    assert n == 30
    _assert_kv(layers, _kv(model, x))
    cache.namespace = "b"
    others = [[200 + i] * 6 for i in range(4)]
    for ids in others:
        cache.store_rows(model, [ids], [_kv(model, ids)])
    assert [e.ids for e in cache.entries.values()] == others[1:]  # bounded: the least recently used go first
    cache.clear()
    assert len(cache) == 0 and not cache.entries
    cache.store_rows(model, [x], [_kv(model, x)])
    other_model = copy.deepcopy(model)
    assert cache.row_prefixes(other_model, [x + [5]], "cpu") == [(0, None)]  # another model: entries forgotten
    assert len(cache) == 0


def test_bad_input_raises_and_changes_nothing(tiny):
    model, _ = tiny
    for kwargs in ({"min_tokens": 0}, {"max_entries": 0}):
        with pytest.raises(ValueError):
            PrefixKVCache(**kwargs)
    cache = PrefixKVCache(min_tokens=2)
    x = list(range(100, 110))
    cache.store_rows(model, [x], [_kv(model, x)])
    stats = dict(cache.stats)
    for rows in ([], [x, []]):
        with pytest.raises(ValueError, match="non-empty"):
            cache.row_prefixes(model, rows, "cpu")
    with pytest.raises(ValueError, match="key/value sets"):
        cache.store_rows(model, [x + [1], x + [2]], [_kv(model, x + [1])])
    with pytest.raises(ValueError, match="positions"):  # a good row, then one whose keys do not match its tokens
        cache.store_rows(model, [x + [1], x + [2]], [_kv(model, x + [1]), _kv(model, x)])
    assert [e.ids for e in cache.entries.values()] == [x] and cache.stats == stats
    found = cache.row_prefixes(model, [x + [1]], "cpu")
    with pytest.raises(ValueError, match="cannot place"):
        stack_prefixes(found, 5, [(0, 9)])


def test_policy_and_training_sampler_go_through_the_one_cache_class(tiny, monkeypatch):
    """HFPolicy and the GRPO sampler both look prefixes up and store rows through PrefixKVCache."""
    need("trl")
    from accelerate import Accelerator

    import trace_gym.train.shared_prefix as shared_prefix
    from trace_gym.train.generation import transformers_generate_fn

    if not shared_prefix.supported():
        pytest.skip("the sampler's prefix cache needs the layered KV cache API of transformers >= 5")
    calls: list[tuple[str, PrefixKVCache]] = []
    for name in ("row_prefixes", "store_batch"):
        original = getattr(PrefixKVCache, name)

        def spy(self, *args, _original=original, _name=name, **kwargs):
            calls.append((_name, self))
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(PrefixKVCache, name, spy)
    assert not hasattr(shared_prefix, "PrefixKVStore")  # no second cache class in training

    model, tok = tiny
    policy = HFPolicy(model, tok, max_new_tokens=4, seed=0)
    system = {"role": "system", "content": "You keep notes for a library. " * 20}
    policy.act_batch([([system, {"role": "user", "content": u}], []) for u in ("save a", "save b")], seeds=[0, 1])
    assert isinstance(policy._prefix, PrefixKVCache)
    assert {name for name, c in calls if c is policy._prefix} == {"row_prefixes", "store_batch"}

    config = copy.deepcopy(model.generation_config)
    config.do_sample, config.pad_token_id = True, tok.pad_token_id
    trainer = SimpleNamespace(processing_class=tok, accelerator=Accelerator(cpu=True), model=model, model_wrapped=model,
                              generation_config=config, temperature=1.0, top_p=1.0, top_k=0,
                              generation_kwargs={}, args=SimpleNamespace(ds3_gather_for_generation=True, gradient_checkpointing_kwargs=None))
    generate = transformers_generate_fn(trainer)
    gen = torch.Generator().manual_seed(0)
    trunk = torch.randint(5, 2000, (40,), generator=gen).tolist()
    prompts = [trunk + torch.randint(5, 2000, (k,), generator=gen).tolist() for k in (3, 5)]
    turn = generate(prompts, 4)
    generate([p + t + [7, 8] for p, t in zip(prompts, turn, strict=True)], 4)  # the next turn reuses each row's own entry
    store = generate.prefix_state["store"]
    assert type(store) is type(policy._prefix) is PrefixKVCache
    assert {name for name, c in calls if c is store} == {"row_prefixes", "store_batch"}
    assert store.stats["reused_tokens"] > store.stats["prefilled_tokens"] > 0
    assert policy.prefix_stats["reused_tokens"] > 0


def test_a_generation_config_the_decoding_loop_does_not_cover_samples_through_generate(tiny):
    """A repetition penalty sends the GRPO sampler to the model's ``generate``; per-prompt token limits still hold."""
    need("trl")
    from accelerate import Accelerator

    from trace_gym.train.generation import fast_sampling, transformers_generate_fn

    model, tok = tiny
    config = copy.deepcopy(model.generation_config)
    config.do_sample, config.pad_token_id, config.repetition_penalty = True, tok.pad_token_id, 1.2
    trainer = SimpleNamespace(processing_class=tok, accelerator=Accelerator(cpu=True), model=model, model_wrapped=model,
                              generation_config=config, temperature=1.0, top_p=1.0, top_k=0, repetition_penalty=1.2,
                              generation_kwargs={}, args=SimpleNamespace(ds3_gather_for_generation=True, gradient_checkpointing_kwargs=None))
    assert not fast_sampling(trainer)
    generate = transformers_generate_fn(trainer)
    torch.manual_seed(0)
    prompts = [torch.randint(5, 2000, (30,)).tolist(), torch.randint(5, 2000, (25,)).tolist()]
    out = generate(prompts, [2, 6])
    assert 1 <= len(out[0]) <= 2 and 1 <= len(out[1]) <= 6
