"""The folder of derived GGUF files: entries named by their sources' contents, and a size bound."""

import os
import shutil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trace_gym.policies.gguf_cache import BUDGET_ENV, cache_budget, cached_gguf_path, entry, prune_cache


def _file(path, data: bytes, mtime_ns: int | None = None):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if mtime_ns is not None:
        os.utime(path, ns=(mtime_ns, mtime_ns))
    return path


def test_an_entry_is_named_by_its_sources_contents_not_where_they_live(tmp_path):
    """The same model file in two environments finds one entry; a changed byte or another file name does not."""
    a = _file(tmp_path / "venv1" / "model.gguf", b"weights" * 1000)
    b = tmp_path / "venv2" / "model.gguf"
    b.parent.mkdir()
    shutil.copy(a, b)
    os.utime(b, ns=(1, 1))
    cache = tmp_path / "cache"
    assert cached_gguf_path(cache, "model", "bf16", [a]) == cached_gguf_path(cache, "model", "bf16", [b])
    assert cached_gguf_path(cache, "model", "bf16", [a]).name.endswith(".bf16.gguf")
    b.write_bytes(b"weights" * 999 + b"weightZ")
    assert cached_gguf_path(cache, "model", "bf16", [a]) != cached_gguf_path(cache, "model", "bf16", [b])
    c = _file(tmp_path / "venv3" / "other.gguf", a.read_bytes())
    assert cached_gguf_path(cache, "model", "bf16", [a]) != cached_gguf_path(cache, "model", "bf16", [c])
    # an adapter folder without its safetensors yet: the missing source counts as absent
    assert cached_gguf_path(cache, "x", "lora", [a, tmp_path / "nope.safetensors"]) == cached_gguf_path(cache, "x", "lora", [a])


def test_pruning_removes_the_least_recently_used_and_spares_the_new_entry(tmp_path):
    old = _file(tmp_path / "old.gguf", b"1" * 100, mtime_ns=1_000)
    mid = _file(tmp_path / "mid.gguf", b"2" * 100, mtime_ns=2_000)
    new = _file(tmp_path / "new.gguf", b"3" * 100, mtime_ns=3_000)
    other = _file(tmp_path / "notes.txt", b"x" * 1000, mtime_ns=0)  # not an entry: never touched
    assert prune_cache(tmp_path, budget=250) == [old]
    assert prune_cache(tmp_path, keep=mid, budget=50) == [new]  # the kept one stays even when over budget
    assert mid.exists() and other.exists() and not old.exists()


def test_using_an_entry_makes_it_the_most_recent(tmp_path, monkeypatch):
    a = _file(tmp_path / "a.gguf", b"a" * 100, mtime_ns=1_000)
    _file(tmp_path / "b.gguf", b"b" * 100, mtime_ns=2_000)
    assert entry(a, make=None) == a  # a hit (nothing made): a is now newer than b
    monkeypatch.setenv(BUDGET_ENV, str(150 / 2**30))
    c = tmp_path / "c.gguf"
    entry(c, lambda path: _file(path, b"c" * 100))  # a new entry prunes down to 150 bytes: b (least recent) then a go, c stays
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.gguf"]


@pytest.mark.parametrize("raw", ["lots", "0", "-1"])
def test_a_bad_budget_is_refused_by_name(monkeypatch, raw):
    monkeypatch.setenv(BUDGET_ENV, raw)
    with pytest.raises(ValueError, match=BUDGET_ENV):
        cache_budget()


def test_the_default_budget_is_some_gigabytes(monkeypatch):
    monkeypatch.delenv(BUDGET_ENV, raising=False)
    assert 2**30 < cache_budget() < 64 * 2**30
    monkeypatch.setenv(BUDGET_ENV, "0.5")
    assert cache_budget() == 2**29


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(1, 50), min_size=1, max_size=8), budget=st.integers(0, 300), keep=st.integers(0, 7))
def test_pruning_fits_the_budget_and_removes_only_older_entries(tmp_path_factory, sizes, budget, keep):
    folder = tmp_path_factory.mktemp("cache")
    files = [_file(folder / f"e{i}.gguf", b"x" * size, mtime_ns=(i + 1) * 10**9) for i, size in enumerate(sizes)]
    kept = files[keep] if keep < len(files) else None
    removed = set(prune_cache(folder, keep=kept, budget=budget))
    left = [f for f in files if f not in removed]
    assert all(f.exists() for f in left) and not any(f.exists() for f in removed)
    assert kept is None or kept in left
    total = sum(sizes[files.index(f)] for f in left)
    others = [f for f in files if f != kept]  # oldest first
    assert removed == set(others[:len(removed)])  # the least recently used go first
    assert total <= budget or removed == set(others)  # over budget only when nothing else is left to remove
    if removed:  # and no more than needed
        assert total + sizes[files.index(others[len(removed) - 1])] > budget


def test_a_float_copy_is_made_once_for_the_same_model_in_another_folder(tmp_path, monkeypatch):
    """``cached_float_gguf`` on a second install of the same GGUF reuses the first's copy (nothing rewritten)."""
    from tests.extras import need, need_smollm2

    need("gguf")
    need("torch")
    need_smollm2()
    from trace_gym.policies import gguf_weights
    from trace_gym.policies.hf_models import smollm2_gguf_path

    source = smollm2_gguf_path()
    first = gguf_weights.cached_float_gguf(source, tmp_path / "cache", weight_type="q8_0")
    copy = tmp_path / "elsewhere" / source.name
    copy.parent.mkdir()
    shutil.copy(source, copy)

    def _no_rewrite(*a, **k):
        raise AssertionError("the copy was converted again")

    monkeypatch.setattr(gguf_weights, "float_gguf", _no_rewrite)
    assert gguf_weights.cached_float_gguf(copy, tmp_path / "cache", weight_type="q8_0") == first
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [first.name]
