"""TrajectoryStore: append-only JSONL, atomic records, torn tails reported, corrupt lines named."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time
import warnings

import pytest

from trace_gym.rollout import Trajectory, TrajectoryStore, TrajectoryStoreError


def _traj(seed: int, **kw) -> Trajectory:
    return Trajectory(env_id="trace-test/notes-v0", policy_id="p", seed=seed, actions=[f"a{seed}"], rewards=[1.0], reward=1.0, **kw)


def test_append_and_load_round_trip(tmp_path):
    store = TrajectoryStore(tmp_path / "sub" / "t.jsonl")
    assert store.load() == [] and len(store) == 0
    for s in range(3):
        store.append(_traj(s, reward_info={"text": "é 中"}))
    raw = store.path.read_bytes()
    assert raw.endswith(b"\n") and raw.count(b"\n") == 3
    loaded = store.load()
    assert [t.seed for t in loaded] == [0, 1, 2]
    assert loaded[1].to_dict() == _traj(1, reward_info={"text": "é 中"}).to_dict()
    assert store.keys() == {("trace-test/notes-v0", "p", s, "{}") for s in range(3)}
    assert store.torn_lines == 0


def test_append_validates_dict_records(tmp_path):
    store = TrajectoryStore(tmp_path / "t.jsonl")
    with pytest.raises(ValueError):
        store.append({"env_id": "x"})
    assert not store.path.exists()


def test_torn_last_line_is_reported_then_cut_on_next_append(tmp_path):
    store = TrajectoryStore(tmp_path / "t.jsonl")
    store.append(_traj(0))
    store.append(_traj(1))
    full = json.dumps(_traj(2).to_dict())
    with open(store.path, "ab") as f:
        f.write(full[: len(full) // 2].encode())  # an interrupted write
    with pytest.warns(RuntimeWarning, match=r"t.jsonl:3: ignoring a torn last record"):
        loaded = store.load()
    assert [t.seed for t in loaded] == [0, 1]
    assert store.torn_lines == 1
    fresh = TrajectoryStore(store.path)
    with pytest.warns(RuntimeWarning, match="removing a torn last record"):
        fresh.append(_traj(2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [t.seed for t in fresh.load()] == [0, 1, 2]
    assert fresh.torn_lines == 0


def test_torn_tail_without_any_complete_line(tmp_path):
    store = TrajectoryStore(tmp_path / "t.jsonl")
    store.path.write_bytes(b'{"env_id": "x", "pol')
    with pytest.warns(RuntimeWarning):
        assert store.load() == []
    with pytest.warns(RuntimeWarning):
        store.append(_traj(0))
    assert [t.seed for t in store.load()] == [0]


@pytest.mark.parametrize(
    "bad",
    [b"{not json", b'{"env_id": "e"}', b'["a list"]', b"\xff\xfe"],
    ids=["invalid-json", "missing-fields", "not-an-object", "not-utf8"],
)
def test_corrupt_middle_line_raises_with_line_number(tmp_path, bad):
    store = TrajectoryStore(tmp_path / "t.jsonl")
    store.append(_traj(0))
    with open(store.path, "ab") as f:
        f.write(bad + b"\n")
    store.append(_traj(1))
    with pytest.raises(TrajectoryStoreError, match=r"t.jsonl:2: corrupt trajectory record"):
        store.load()


def test_blank_lines_hold_no_record_and_are_ignored(tmp_path):
    store = TrajectoryStore(tmp_path / "t.jsonl")
    store.append(_traj(0))
    with open(store.path, "ab") as f:
        f.write(b"\n   \n")
    store.append(_traj(1))
    assert [t.seed for t in store.load()] == [0, 1]


def _writer(path: str, worker: int, n: int) -> None:
    store = TrajectoryStore(path)
    for i in range(n):
        # Large records make interleaving visible if writes were not atomic.
        store.append(_traj(worker * 1000 + i, reward_info={"pad": "x" * 20000}))


def test_concurrent_appends_from_processes_never_interleave(tmp_path):
    path = str(tmp_path / "t.jsonl")
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(path, w, 15)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    seeds = sorted(t.seed for t in TrajectoryStore(path).load())
    assert seeds == sorted(w * 1000 + i for w in range(4) for i in range(15))


_KILL_SCRIPT = """
import sys
from trace_gym.rollout import Trajectory, TrajectoryStore
store = TrajectoryStore(sys.argv[1])
i = 0
while True:
    store.append(Trajectory(env_id="e", policy_id="p", seed=i, reward_info={"pad": "y" * 50000}))
    i += 1
    if i == 5:
        print("ready", flush=True)
"""


def test_killed_writer_leaves_a_loadable_file(tmp_path):
    path = tmp_path / "t.jsonl"
    proc = subprocess.Popen([sys.executable, "-c", _KILL_SCRIPT, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.05)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    store = TrajectoryStore(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a torn tail is allowed (and reported) here
        seeds = [t.seed for t in store.load()]
    assert len(seeds) >= 5 and seeds == list(range(len(seeds)))
    assert store.torn_lines in (0, 1)
