import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from trace_gym.core import TextSpace


@given(st.text(max_size=200))
def test_any_unicode_string_up_to_max_length_is_contained(s):
    assert TextSpace(200).contains(s)


def test_rejects_non_strings_and_too_long():
    space = TextSpace(5)
    assert space.contains("")
    assert not space.contains("123456")
    assert not space.contains(b"abc")
    assert not space.contains(None)
    assert not space.contains(np.array([1]))


def test_sample_is_seeded_and_valid():
    a, b = TextSpace(30, seed=7), TextSpace(30, seed=7)
    xs = [a.sample() for _ in range(50)]
    assert xs == [b.sample() for _ in range(50)]
    assert all(a.contains(x) for x in xs)
    assert any(ord(c) > 127 for x in xs for c in x), "sample() should exercise unicode"


def test_bad_max_length():
    with pytest.raises(ValueError, match="max_length"):
        TextSpace(-1)


def test_vector_utilities_batch_as_tuples():
    from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

    space = TextSpace(10)
    batched = batch_space(space, 3)
    out = create_empty_array(space, 3)
    items = ["a", "é", ""]
    res = concatenate(space, items, out)
    assert tuple(res) == tuple(items)
    assert list(iterate(batched, res)) == items
