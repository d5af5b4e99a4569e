"""Every observation of every registered env is a function of the seed and the actions alone.

Two separate processes play the same seeds and the same hostile actions on every ``trace/*``
id and write what they observe (the observation text, the reward, the end flags and ``info``
as JSON, as the env server sends it); the two records must be byte-identical.  The processes
differ in everything an observation must not depend on: the hash seed (set and dict order of
strings), the time zone, the order in which the ids are played (module caches warmed by other
envs, the wall clock at each id) and, as separate processes, every object address.

The actions: each tool of the episode called with every parameter set to ``"test"``, then to
``-1``; then seeded hostile actions (:func:`trace_gym.testing.seeded_hostile_action`: parser
attacks, junk arguments with the tool's own parameter names, plain messages).  A finished
episode is reset with the next seed and the actions go on.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym

import trace_gym  # noqa: F401  (registers trace/*)
from trace_gym.testing import seeded_hostile_action

ROOT = Path(__file__).resolve().parents[1]
SEEDS = (1001, 7)
RANDOM_ACTIONS = 12
MAX_SIZE = 400  # hostile shapes up to a few thousand characters


def _env_ids() -> list[str]:
    return sorted(i for i in gym.registry if i.startswith("trace/"))


def _actions(info: dict[str, Any], rng: random.Random) -> list[str]:
    tools = [t["function"] for t in info.get("tools", [])]
    params = {t["name"]: sorted((t.get("parameters") or {}).get("properties") or {}) for t in tools}
    out = []
    for name, names in params.items():
        out.append("<tool_call>" + json.dumps({"name": name, "arguments": dict.fromkeys(names, "test")}) + "</tool_call>")
        out.append(json.dumps({"name": name, "arguments": dict.fromkeys(names, -1)}))
    out += [seeded_hostile_action(rng, list(params), MAX_SIZE, params)[1] for _ in range(RANDOM_ACTIONS)]
    return out


def _line(env_id: str, seed: int, step: Any, *values: Any) -> str:
    *head, info = values
    shown = {k: v for k, v in info.items() if k != "messages"}  # each message is observed once, in its step
    # ensure_ascii: a lone surrogate from a hostile action is written, not refused
    return json.dumps([env_id, seed, step, *head, json.dumps(shown, sort_keys=True, default=str)]) + "\n"


def play(env_id: str) -> list[str]:
    """What playing :data:`SEEDS` with the probe's actions on ``env_id`` observes, one JSON line per reset or step."""
    env = gym.make(env_id, disable_env_checker=True)
    lines = []
    for seed in SEEDS:
        obs, info = env.reset(seed=seed)
        lines.append(_line(env_id, seed, "reset", obs, info))
        episode_seed = seed
        for k, action in enumerate(_actions(info, random.Random(f"{env_id}:{seed}"))):
            obs, reward, terminated, truncated, info = env.step(action)
            lines.append(_line(env_id, seed, k, obs, reward, terminated, truncated, info))
            if terminated or truncated:
                lines.append(json.dumps([env_id, seed, "transcript", info["messages"]], default=str) + "\n")
                episode_seed += 100
                obs, info = env.reset(seed=episode_seed)
                lines.append(_line(env_id, episode_seed, "reset", obs, info))
        lines.append(json.dumps([env_id, seed, "transcript", info["messages"]], default=str) + "\n")
    env.close()
    return lines


def _probe(out: str, reverse: bool) -> None:
    ids = _env_ids()
    with open(out, "w", encoding="ascii") as f:
        for env_id in reversed(ids) if reverse else ids:
            f.writelines(play(env_id))


def _run_probe(tmp_path: Path, name: str, hash_seed: str, tz: str, reverse: bool) -> subprocess.Popen:
    out = tmp_path / f"{name}.jsonl"
    code = f"from tests.test_observation_determinism import _probe; _probe({str(out)!r}, {reverse})"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": hash_seed, "TZ": tz}
    return subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)


def _by_id(path: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in path.read_text(encoding="ascii").splitlines(keepends=True):
        out.setdefault(json.loads(line)[0], []).append(line)
    return out


def _first_difference(a: list[str], b: list[str]) -> str:
    for x, y in zip(a, b, strict=False):
        if x != y:
            at = next((i for i, (p, q) in enumerate(zip(x, y, strict=False)) if p != q), min(len(x), len(y)))
            return f"{json.loads(x)[:3]}:\n  {x[max(0, at - 160):at + 80]!r}\n  {y[max(0, at - 160):at + 80]!r}"
    return f"{len(a)} lines against {len(b)}"


def test_two_processes_observe_the_same_bytes_on_every_env(tmp_path):
    procs = [_run_probe(tmp_path, "a", "1", "UTC", False), _run_probe(tmp_path, "b", "2", "Pacific/Kiritimati", True)]
    for p in procs:
        _, err = p.communicate(timeout=900)
        assert p.returncode == 0, err[-3000:]
    a, b = _by_id(tmp_path / "a.jsonl"), _by_id(tmp_path / "b.jsonl")
    # every id a fresh process registers (this process may hold test-only ids besides)
    assert sorted(a) == sorted(b) and len(a) >= 20 and {"trace/toolsandbox-v0", "trace/tau2-retail-v0"} <= set(a)
    differ = {env_id: _first_difference(a[env_id], b[env_id]) for env_id in a if a[env_id] != b[env_id]}
    assert not differ, "\n".join(f"{k}: {v}" for k, v in differ.items())
    assert all(len(lines) > 2 * len(SEEDS) for lines in a.values())  # every id played its actions


def test_the_probe_reaches_tool_errors_and_hostile_shapes():
    """The actions the probe plays do reach the error paths: ToolSandbox's missing-row error among them."""
    lines = [json.loads(x) for x in play("trace/toolsandbox-v0")]
    observed = "\n".join(str(r[3]) for r in lines if r[2] not in ("reset", "transcript"))
    assert "NoDataError: No db entry matching" in observed and "not executed" in observed


def test_a_missing_row_error_names_no_address_of_this_process():
    from trace_gym.toolsandbox.world import NoDataError, World

    worlds = [World.from_tables({"CONTACT": []}) for _ in range(2)]  # both alive: their tables are different objects
    texts = []
    for world in worlds:
        try:
            world.remove("CONTACT", "person_id", "test")
        except NoDataError as exc:
            texts.append(str(exc))
    assert len(texts) == 2 and texts[0] == texts[1]
    assert texts[0].startswith("No db entry matching predicate=<Expr [")
