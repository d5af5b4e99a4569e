"""Which engine acts: llama.cpp where it is installed and the model has a GGUF copy, transformers otherwise;
the demo's context guard works over either."""

from __future__ import annotations

import importlib.util

import pytest

from tests.extras import need, need_smollm2
from trace_gym.demo import DemoConfig
from trace_gym.demo.guard import ContextGuard
from trace_gym.policies import engine
from trace_gym.policies.engine import acting_spec


def test_acting_spec_per_engine(monkeypatch):
    assert acting_spec("smollm2", "transformers") == "smollm2"
    assert acting_spec("smollm2", "llamacpp") == "llamacpp:smollm2"
    assert acting_spec("/some/merged/folder", "auto") == "/some/merged/folder"  # no GGUF copy: transformers
    with pytest.raises(ValueError, match="llamacpp runs smollm2 only"):
        acting_spec("hf:Qwen/Qwen2.5-7B-Instruct", "llamacpp")
    with pytest.raises(ValueError, match="engine must be one of auto, transformers, llamacpp"):
        acting_spec("smollm2", "vllm")
    monkeypatch.setattr(engine.importlib.util, "find_spec", lambda name: None)  # llama-cpp-python absent
    assert acting_spec("smollm2", "auto") == "smollm2"


def test_auto_is_llama_cpp_where_installed():
    installed = importlib.util.find_spec("llama_cpp") is not None
    assert engine.llama_cpp_installed() is installed
    assert acting_spec("smollm2") == ("llamacpp:smollm2" if installed else "smollm2")


def test_demo_config_checks_the_engine(tmp_path):
    assert DemoConfig.for_run(out=tmp_path, model="tiny", engine="transformers").engine == "transformers"
    with pytest.raises(ValueError, match="engine must be one of"):
        DemoConfig.for_run(out=tmp_path, model="tiny", engine="gpu")


def test_context_guard_over_llama_cpp_counts_overflows_in_lock_step_and_serving():
    need("llama_cpp")
    need_smollm2()
    from trace_gym.episode import SERVING, rollout_mode
    from trace_gym.policies import policy_from_spec
    from trace_gym.policies.base import ContextExceeded

    pol = policy_from_spec("llamacpp:smollm2", max_new_tokens=8, greedy=True, batch_size=2)
    guard = ContextGuard(pol)
    short = ([{"role": "system", "content": "You are helpful."}, {"role": "user", "content": "Say hi."}], [])
    long = ([{"role": "user", "content": "word " * (pol.context_limit() + 10)}], [])
    with pytest.raises(ContextExceeded) as exc:
        guard.act_batch([short, long], seeds=[0, 1])
    assert exc.value.rows == [1] and guard.fired == 1
    assert rollout_mode(guard, 2) == SERVING  # serve is forwarded: evaluation under the guard serves continuously

    class Queue:
        def __init__(self):
            self.waiting, self.answered, self.rejected = [(0, short, 0), (1, long, 1)], {}, []

        def take(self):
            return self.waiting.pop(0) if self.waiting else None

        def answer(self, key, action):
            self.answered[key] = action

        def reject(self, key, error):
            self.rejected.append(key)

    q = Queue()
    guard.serve(q)
    assert q.rejected == [1] and list(q.answered) == [0] and guard.fired == 2
