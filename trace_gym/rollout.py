"""Running a policy in an environment, and storing the resulting trajectories.

* :func:`rollout` plays one episode and returns a :class:`Trajectory`.
* :func:`rollout_batch` plays several episodes at once so that a batching policy answers
  all of them together; :func:`rollout_queue` plays a queue of episodes through a few env
  slots, starting the next episode in a slot as soon as its episode ends, in lock step
  (``act_batch``, one call per turn) or by continuous serving (``serve``) as
  :func:`~trace_gym.episode.rollout_mode` says.
* :func:`collect` runs many seeds of one env id, appending every finished episode
  to a :class:`TrajectoryStore` and skipping seeds already stored (resume).

The store is a JSON-lines file written append-only: each record is one
``os.write`` of a complete line to a file opened with ``O_APPEND``, followed by an
``fsync``.  An interrupted run leaves at worst a torn last line, which loading
reports (a warning and :attr:`TrajectoryStore.torn_lines`) and the next append
cuts off; a damaged line anywhere else is an error naming its line number.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym

from .batching import serve_episodes
from .episode import CONTEXT_LENGTH, LOCK_STEP, SERVING, Episode, EpisodeQueue, RolloutError, mode_note, rollout_mode
from .policies.base import ContextExceeded, Policy, PolicyError, act_batch
from .trajectory import Trajectory, episode_key

__all__ = [
    "Trajectory",
    "RolloutError",
    "rollout",
    "rollout_batch",
    "rollout_queue",
    "collect",
    "TrajectoryStore",
    "TrajectoryStoreError",
    "episode_key",
    "CONTEXT_LENGTH",
    "LOCK_STEP",
    "SERVING",
    "rollout_mode",
    "mode_note",
]

def rollout(env: gym.Env, policy: Policy, seed: int, options: dict[str, Any] | None = None) -> Trajectory:
    """Play one episode of ``env`` with ``policy`` from ``reset(seed=seed, options=options)``.

    Raises :class:`RolloutError` (with the partial trajectory) when the policy fails.
    """
    return rollout_batch([env], policy, [seed], options)[0]


def rollout_batch(
    envs: Sequence[gym.Env],
    policy: Policy,
    seeds: Sequence[int],
    options: dict[str, Any] | Sequence[dict[str, Any] | None] | None = None,
    policy_seeds: Sequence[int] | None = None,
) -> list[Trajectory]:
    """Play ``len(envs)`` episodes in lock step, one env per seed, batching the policy's queries.

    ``options`` are the reset options of every episode, or a list of one per episode
    (several tasks in one batch).  The policy sees each episode's env seed as its
    episode seed, unless ``policy_seeds`` gives others (several samples of one env
    seed, for instance).
    """
    if len(envs) != len(seeds):
        raise ValueError(f"rollout_batch needs one env per seed, got {len(envs)} envs and {len(seeds)} seeds")
    return rollout_queue(envs, policy, seeds, options, policy_seeds)


def rollout_queue(
    envs: Sequence[gym.Env],
    policy: Policy,
    seeds: Sequence[int],
    options: dict[str, Any] | Sequence[dict[str, Any] | None] | None = None,
    policy_seeds: Sequence[int] | None = None,
    *,
    on_episode: Callable[[Trajectory], None] | None = None,
) -> list[Trajectory]:
    """Play one episode per seed, ``len(envs)`` at a time, and return them in seed order.

    The envs are slots (:class:`~trace_gym.episode.EpisodeQueue`): when an episode ends, its env
    starts the next seed at once.  The mode is :func:`~trace_gym.episode.rollout_mode`'s:

    * **lock step** (one slot, or a policy without ``serve``): every turn, one ``act_batch`` call
      answers every episode in play, and the call waits for its longest action;
    * **continuous serving** (several slots and a policy with ``serve``): the policy answers each
      action as soon as it is complete and its episode steps at once
      (:func:`~trace_gym.batching.serve_episodes`).

    The episodes, their order and their scoring are the same in both.  ``on_episode`` is called
    with each episode as it ends.  A :class:`~trace_gym.policies.base.ContextExceeded` from the
    policy ends the episodes it names as truncated (``context_length``) and the others play on;
    any other :class:`PolicyError` raises :class:`RolloutError` (``completed``: every episode
    that had finished, each already handed to ``on_episode``).
    """
    queue = EpisodeQueue(envs, policy, seeds, options, policy_seeds, on_episode=on_episode)
    if queue.mode == SERVING:
        serve_episodes(policy, queue)
    else:
        _lock_step(policy, queue)
    return queue.results()


def _lock_step(policy: Policy, queue: EpisodeQueue) -> None:
    """Play ``queue`` with one ``act_batch`` call per turn of the episodes in play."""
    active: list[tuple[int, Episode]] = []

    def fill(env: gym.Env) -> None:
        started = queue.start(env)
        if started is not None:
            active.append(started)

    for env in queue.envs:
        fill(env)
    acting = queue.acting
    while active:
        t0 = time.perf_counter()
        try:
            actions = act_batch(policy, [(ep.messages, ep.tools) for _, ep in active], [acting[j] for j, _ in active])
            wrong = [a for a in actions if not isinstance(a, str)]
            if wrong:
                raise PolicyError(f"returned {type(wrong[0]).__name__}, not a text action")
        except ContextExceeded as exc:  # those episodes end as truncated; the others are asked again
            rows = sorted(set(exc.rows))
            if not rows or rows[0] < 0 or rows[-1] >= len(active):
                raise RolloutError(f"policy {policy.policy_id!r}: {exc} (bad row indices {exc.rows})",
                                   active[0][1].finish(), queue.finished) from exc
            cut = [active[i] for i in rows]
            active = [x for i, x in enumerate(active) if i not in exc.rows]
            for j, ep in cut:
                ep.cut(CONTEXT_LENGTH)
                queue.end(j, ep)
                fill(ep.env)
            continue
        except PolicyError as exc:
            partial = active[0][1].finish()
            raise RolloutError(
                f"policy {policy.policy_id!r} failed at step {partial.num_steps} of seed {partial.seed}: {exc}", partial,
                queue.finished,
            ) from exc
        spent = (time.perf_counter() - t0) / len(active)
        still: list[tuple[int, Episode]] = []
        ended: list[tuple[int, Episode]] = []
        for (j, ep), action in zip(active, actions, strict=True):
            ep.traj.timings["policy_s"] += spent
            ep.apply(action)
            (ended if ep.done else still).append((j, ep))
        active = still
        for j, ep in ended:
            queue.end(j, ep)
            fill(ep.env)


def _parse_seed(s: Any) -> int:
    if isinstance(s, bool) or not isinstance(s, int):
        raise TypeError(f"seeds must be ints, got {s!r}")
    return s


def collect(
    env_id: str,
    policy: Policy,
    seeds: Iterable[int],
    *,
    store: TrajectoryStore | str | Path | None = None,
    options: dict[str, Any] | Sequence[dict[str, Any] | None] | None = None,
    env_kwargs: dict[str, Any] | None = None,
    batch_size: int = 1,
    resume: bool = True,
    on_episode: Callable[[Trajectory], None] | None = None,
    on_skip: Callable[[int], None] | None = None,
) -> list[Trajectory]:
    """Play ``env_id`` once per seed and return the new trajectories.

    With a ``store``, each finished episode is appended as soon as it ends and, when
    ``resume`` is true, seeds whose episode (same env id, policy id, seed and options)
    is already stored are skipped, and an episode another run stores meanwhile is not
    stored twice (it is still returned; ``on_skip`` is called for it instead of
    ``on_episode``).  ``batch_size > 1`` plays that many seeds at a time
    (one env instance each, each starting the next seed as soon as its episode ends:
    :func:`rollout_queue`, in lock step or continuous serving as :func:`rollout_mode` says) so
    that the policy can batch generation.
    ``options``: the reset options of every episode, or a list with one set per seed
    (several tasks in one batch).  ``on_episode``/``on_skip`` are progress callbacks.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    seed_list = [_parse_seed(s) for s in seeds]
    per_seed = list(options) if isinstance(options, (list, tuple)) else [options] * len(seed_list)
    if len(per_seed) != len(seed_list):
        raise ValueError(f"collect got {len(per_seed)} option sets for {len(seed_list)} seeds")
    if isinstance(store, (str, Path)):
        store = TrajectoryStore(store)
    done: set[tuple[str, str, int, str]] = store.keys() if (store is not None and resume) else set()
    todo = []
    for s, opts in zip(seed_list, per_seed, strict=True):
        if episode_key(env_id, policy.policy_id, s, opts) in done:
            if on_skip is not None:
                on_skip(s)
        else:
            todo.append((s, opts))
    results: list[Trajectory] = []
    if not todo:
        return results
    def keep(t: Trajectory) -> None:
        t.env_id = env_id  # the id the caller asked for (a "module:id" form keeps its prefix out)
        results.append(t)
        if store is not None and not store.append(t, unique=resume):
            if on_skip is not None:  # another run into the same store stored this episode meanwhile
                on_skip(t.seed)
            return
        if on_episode is not None:
            on_episode(t)

    envs = [gym.make(env_id, **(env_kwargs or {})) for _ in range(min(batch_size, len(todo)))]
    try:  # each finished episode is kept (and stored) as it ends; its env starts the next seed
        played = rollout_queue(envs, policy, [s for s, _ in todo], [o for _, o in todo], on_episode=keep)
        results[:] = played  # in seed order (``keep`` saw them in the order they ended)
    finally:
        for e in envs:
            e.close()
    return results


class TrajectoryStoreError(ValueError):
    """A trajectory file holds a record that cannot be read (not at the torn tail)."""


class TrajectoryStore:
    """An append-only JSON-lines file of :class:`Trajectory` records."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.torn_lines = 0  # set by the last load: 1 when the file ends in an incomplete record
        self._seen: set[tuple[str, str, int, str]] = set()  # keys of the bytes [0, _seen_upto) (unique appends)
        self._seen_upto = 0

    # -- writing ---------------------------------------------------------------
    def _cut_torn_tail(self, fd: int) -> None:
        """Drop an incomplete last line left by an interrupted write (caller holds the lock)."""
        size = os.fstat(fd).st_size
        if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
            return
        keep, pos = 0, size
        while pos > 0:  # find the last newline; everything after it is the torn record
            step = min(65536, pos)
            pos -= step
            idx = os.pread(fd, step, pos).rfind(b"\n")
            if idx >= 0:
                keep = pos + idx + 1
                break
        warnings.warn(
            f"{self.path}: removing a torn last record ({size - keep} bytes) left by an interrupted write",
            RuntimeWarning,
            stacklevel=3,
        )
        os.ftruncate(fd, keep)

    def _refresh_seen(self, fd: int) -> None:
        """Read the keys of records appended since the last look (caller holds the lock)."""
        size = os.fstat(fd).st_size
        if size < self._seen_upto:  # the file was cut or replaced: read it again
            self._seen, self._seen_upto = set(), 0
        if size == self._seen_upto:
            return
        data = os.pread(fd, size - self._seen_upto, self._seen_upto)
        end = data.rfind(b"\n") + 1
        for raw in data[:end].split(b"\n"):
            try:
                r = json.loads(raw)
                self._seen.add(episode_key(r["env_id"], r["policy_id"], r["seed"], r.get("options")))
            except (ValueError, KeyError, TypeError):
                continue  # not a record (blank or corrupt: loading reports those)
        self._seen_upto += end

    def append(self, trajectory: Trajectory | dict[str, Any], *, unique: bool = False) -> bool:
        """Append one record atomically: a single write of a whole line, then fsync.

        Writers (threads or processes) take an exclusive ``flock`` around the write, so
        the torn-tail check never mistakes another writer's record in flight for one.
        With ``unique=True`` the record is written only if no record of the same episode
        (:func:`episode_key`) is stored yet, checked under the same lock, so concurrent
        runs into one store never duplicate an episode.  Returns whether it was written.
        """
        record = trajectory.to_dict() if isinstance(trajectory, Trajectory) else Trajectory.from_dict(trajectory).to_dict()
        line = (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        created = not self.path.exists()
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._cut_torn_tail(fd)
            if unique:
                self._refresh_seen(fd)
                key = episode_key(record["env_id"], record["policy_id"], record["seed"], record.get("options"))
                if key in self._seen:
                    return False
            written = os.write(fd, line)
            if written != len(line):
                raise OSError(f"{self.path}: short write ({written} of {len(line)} bytes); the last record is torn")
            os.fsync(fd)
        finally:
            os.close(fd)  # also releases the lock
        if created:
            self._fsync_dir()
        return True

    def _fsync_dir(self) -> None:
        try:
            dfd = os.open(self.path.parent, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(dfd)
        except OSError:
            pass
        finally:
            os.close(dfd)

    # -- reading ---------------------------------------------------------------
    def iter_records(self) -> Iterator[dict[str, Any]]:
        """Yield the stored records as dicts, validating each; see the module docstring for errors."""
        self.torn_lines = 0
        if not self.path.exists():
            return
        with open(self.path, "rb") as f:
            data = f.read()
        lines = data.split(b"\n")
        tail = lines.pop()  # b"" when the file ends with a newline
        for lineno, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw.decode("utf-8"))
                Trajectory.from_dict(record)
            except (UnicodeDecodeError, json.JSONDecodeError, ValueError, TypeError) as exc:
                raise TrajectoryStoreError(f"{self.path}:{lineno}: corrupt trajectory record: {exc}") from None
            yield record
        if tail.strip():
            self.torn_lines = 1
            warnings.warn(
                f"{self.path}:{len(lines) + 1}: ignoring a torn last record ({len(tail)} bytes, no newline) "
                "left by an interrupted write; torn_lines=1",
                RuntimeWarning,
                stacklevel=2,
            )

    def load(self) -> list[Trajectory]:
        return [Trajectory.from_dict(r) for r in self.iter_records()]

    def keys(self) -> set[tuple[str, str, int, str]]:
        """Episode keys (:func:`episode_key`) of every stored record."""
        return {episode_key(r["env_id"], r["policy_id"], r["seed"], r.get("options")) for r in self.iter_records()}

    def __len__(self) -> int:
        return sum(1 for _ in self.iter_records())
