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


def test_shared_memory_for_text_is_refused_with_what_to_pass():
    from gymnasium.vector.utils import create_shared_memory

    from trace_gym.core.spaces import SharedMemoryError

    for space in (TextSpace(10), TextSpace()):
        with pytest.raises(SharedMemoryError, match=r'vector_kwargs=\{"shared_memory": False\}'):
            create_shared_memory(space, n=2)


def test_the_async_vector_env_refuses_shared_memory_before_starting_workers():
    import gymnasium as gym

    import tests.core.counter_env  # noqa: F401  (registers trace-test/counter-v0)
    from trace_gym.core.spaces import SharedMemoryError

    with pytest.raises(SharedMemoryError, match="shared_memory=False"):
        gym.vector.AsyncVectorEnv([lambda: gym.make("trace-test/counter-v0")] * 2)
    venv = gym.vector.AsyncVectorEnv([lambda: gym.make("trace-test/counter-v0")] * 2, shared_memory=False)
    obs, _ = venv.reset(seed=[0, 1])
    assert all(isinstance(o, str) and o and set(o) != {"a"} for o in obs)
    venv.close()
