"""docs/env-reference.md is the registry's: a fresh render equals the page, and what each env declares about its
reward entries and episode ends is what it does."""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import gymnasium as gym
import pytest

import trace_gym  # noqa: F401  (registers the ids)
from trace_gym.core.env import TRUNCATED, ToolEnv
from trace_gym.env_reference import START, UndocumentedArgument, args_section, make_arguments

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "env-reference.md"
SCRIPT = ROOT / "scripts" / "make_env_reference.py"


def _fresh_env() -> dict[str, str]:
    """The environment of a fresh install: no user spec folder registers extra ids."""
    env = {k: v for k, v in os.environ.items() if k != "TRACE_GYM_ENVS_DIR"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _ids() -> list[str]:
    """The ids a fresh install registers (other tests register ids of their own in this process)."""
    code = "from trace_gym.registration import list_envs; print(' '.join(i for i, _ in list_envs()))"
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_fresh_env(), capture_output=True, text=True,
                          check=True, timeout=900).stdout.split()


def test_the_page_is_a_fresh_render_of_the_registry():
    code = "from trace_gym.env_reference import render_reference; print(render_reference(), end='')"
    fresh = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_fresh_env(), capture_output=True, text=True,
                           check=True, timeout=900).stdout
    assert START in fresh
    assert PAGE.read_text(encoding="utf-8") == fresh, (
        "docs/env-reference.md differs from the registry: run `python scripts/make_env_reference.py` and commit it")


def test_every_registered_id_has_a_section_with_its_spaces_and_ends():
    page = PAGE.read_text(encoding="utf-8")
    for env_id in IDS:
        assert f"### `{env_id}`" in page, f"{env_id} has no section in docs/env-reference.md"
    for heading in ("### `gym.make` arguments", "### Reward: `info[\"reward_info\"]`",
                    "### Episode end: `info[\"termination_reason\"]`", "**The version suffix.**", "observation space"):
        assert heading in page


def test_the_script_checks_and_rewrites_a_stale_page(tmp_path):
    stale = tmp_path / "env-reference.md"
    stale.write_text(PAGE.read_text(encoding="utf-8").replace("| version | 0 |", "| version | 7 |", 1), encoding="utf-8")
    run = [sys.executable, str(SCRIPT), "--out", str(stale)]
    check = subprocess.run([*run, "--check"], env=_fresh_env(), capture_output=True, text=True, timeout=900)
    assert check.returncode == 1 and "out of date" in check.stderr
    subprocess.run(run, env=_fresh_env(), capture_output=True, text=True, timeout=900, check=True)
    assert stale.read_text(encoding="utf-8") == PAGE.read_text(encoding="utf-8")


def _class(env_id: str) -> type:
    module, _, name = gym.spec(env_id).entry_point.partition(":")
    return getattr(__import__(module, fromlist=[name]), name)


IDS = _ids()
CLASSES = list(dict.fromkeys(_class(i) for i in IDS))


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_every_reason_an_env_can_end_with_is_declared(cls):
    """Each ``end("reason")`` written in the env family's code (its class's module and the core loop) is one of the
    class's ``termination_reasons``."""
    written = set()
    for module in {sys.modules[cls.__module__], sys.modules[ToolEnv.__module__]}:
        written |= set(re.findall(r"\bend\(\s*\"(\w+)\"", inspect.getsource(module)))
    written.add(TRUNCATED)
    assert written - set(cls.termination_reasons) == set(), f"{cls.__name__} does not declare {written}"
    assert cls.reward_info_keys, f"{cls.__name__} declares no reward_info entries"


def _play(env_id: str) -> list[tuple[str, dict]]:
    """``(termination reason, reward_info)`` of two episodes: one cut by ``truncate()`` and one played to its end
    (a capability env's reference solution; else a stop message, then messages until the step limit)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = gym.make(env_id)
    inner = env.unwrapped
    out = []
    env.reset(seed=0)
    reward_info = inner.truncate()[1]
    out.append((inner.termination_reason, reward_info))
    env.reset(seed=1)
    actions = inner.reference_actions() if hasattr(inner, "reference_actions") else ["Thanks! ###STOP###"]
    done, info = False, {}
    for i in range(inner.max_steps + 1):
        action = actions[i] if i < len(actions) else "Is there anything else I can help you with?"
        _, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            done = True
            break
    assert done, f"{env_id}: the episode did not end within its step limit"
    out.append((info["termination_reason"], info["reward_info"]))
    env.close()
    return out


@pytest.mark.parametrize("env_id", IDS)
def test_the_declared_reward_entries_and_ends_are_what_the_env_reports(env_id):
    cls = _class(env_id)
    for reason, reward_info in _play(env_id):
        assert reason in cls.termination_reasons, f"{env_id} ended with undeclared reason {reason!r}"
        undeclared = set(reward_info) - set(cls.reward_info_keys)
        assert not undeclared, f"{env_id}: reward_info has undeclared entries {sorted(undeclared)}"


def test_arguments_come_with_their_descriptions_and_an_undocumented_one_is_refused():
    doc = """Summary.

    Args:
        alpha: the first
            one, continued.
        beta (int): the second.

    Not an argument: this paragraph ends the section.
    """
    assert args_section(doc) == {"alpha": "the first one, continued.", "beta": "the second."}

    class Documented(ToolEnv):
        """An env.

        Args:
            alpha: what alpha is.
        """

        def __init__(self, alpha: int = 3, **kwargs):
            super().__init__(**kwargs)

    rows = {name: (default, text) for name, default, text in make_arguments(Documented)}
    assert rows["alpha"] == ("3", "what alpha is.")
    assert rows["max_steps"][0] == "100" and "step limit" in rows["max_steps"][1]  # passed on to ToolEnv

    class Undocumented(ToolEnv):
        """An env without an Args section."""

        def __init__(self, gamma: float = 0.5):
            super().__init__()

    with pytest.raises(UndocumentedArgument, match="gamma"):
        make_arguments(Undocumented)
