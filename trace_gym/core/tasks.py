"""The task-source seam: what generic code may ask an environment about its tasks.

Evaluation, analysis, comparison and the prompt-optimization baseline never parse an
env id or read a benchmark's files: they ask the env's :class:`TaskSource` which tasks
each split holds, which reset options play a task, what a task's gold reference is and
which report group it belongs to.  An env offers one through a ``task_source``
attribute (usually a property) on its unwrapped instance; :func:`task_source` finds it,
:func:`task_source_for` makes the env of a registered id and asks it.

A new benchmark needs no edit of generic code: give its env a ``task_source`` that
implements the Protocol below.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "Gold",
    "NoTaskSourceError",
    "TaskError",
    "TaskSource",
    "UnknownSplitError",
    "UnknownTaskError",
    "find_task_source",
    "task_source",
    "task_groups",
    "tasks_per_group",
    "task_source_for",
]


class TaskError(ValueError):
    """A task source was asked for something it does not hold."""


class UnknownSplitError(TaskError):
    """No split of that name; the message names the splits there are."""


class UnknownTaskError(TaskError):
    """No task of that id; the message names the source and the id."""


class NoTaskSourceError(TaskError):
    """The environment offers no task source; the message says how to add one."""


@dataclass(frozen=True)
class Gold:
    """A task's reference solution, as generic code (the offline labeler, a gold replay) reads it.

    ``actions`` are the agent's reference tool calls in order, each ``{"name": str,
    "arguments": dict}``; ``write_tools`` names the tools that change the world state
    (so the expected writes are the actions that call one, :attr:`writes`);
    ``communicate`` lists facts the agent must tell the user; ``refuse`` says that the right answer is to
    tell the user the request cannot be done (e.g. a tool it needs is not offered), so ``actions`` lists what
    the request would need, not what the agent should call, and ``missing`` names the tools withheld from it
    where the benchmark says so; ``details`` holds the benchmark's own form of the reference (τ²-bench: the
    task's ``evaluation_criteria``).  Never shown to the agent.
    """

    actions: tuple[Mapping[str, Any], ...]
    write_tools: frozenset[str]
    communicate: tuple[str, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)
    refuse: bool = False
    missing: tuple[str, ...] = ()

    @property
    def writes(self) -> tuple[Mapping[str, Any], ...]:
        """The expected writes: the reference calls of write tools, in order."""
        return tuple(a for a in self.actions if a.get("name") in self.write_tools)


@runtime_checkable
class TaskSource(Protocol):
    """The tasks of an environment: splits, the reset options that play one, gold and groups.

    Task ids are strings.  Contract:

    * ``splits()`` is a non-empty tuple of split names and ``default_split()`` is one of them
      (the split an evaluation uses when none is named).
    * ``task_ids(split)`` returns the ids of ``split`` (``None``: the default split) in a fixed
      order; an unknown split raises :class:`UnknownSplitError` naming the splits there are.
    * ``reset_options(task_id)`` returns a new dict that, passed as ``env.reset(seed=s,
      options=...)``, plays that task for every seed ``s`` (the seed varies only what the
      benchmark leaves to chance); it holds ``option_key: <task>``.  ``gold`` and ``group``
      answer for the same ids.  Each raises :class:`UnknownTaskError` for an id the source does
      not know.
    * ``gold(task_id)`` is the task's :class:`Gold` reference, or ``None`` when the benchmark
      has none for it.
    * ``group(task_id)`` is a short, stable label to group results by in reports (a domain,
      a category, a case).  A source whose tasks belong to several report groups at once (a
      ToolSandbox scenario carries several categories) may also offer ``groups(task_id)``, the
      non-empty tuple of every group the task counts in, ``group(task_id)`` first or among them;
      :func:`task_groups` asks for it and falls back to ``(group(task_id),)``.
    * ``task_id_of(info, options)`` names the task an episode played from its reset ``info``
      and reset ``options``, or returns ``None`` when they do not say.
    * ``domain`` is the tool domain the tasks are played in when capability environments can
      be synthesized for it (the tools, policy and database family, e.g. ``"retail"``), else
      ``None``; ``instruction`` is the agent instruction every task's system prompt opens with
      (the text a prompt optimizer may replace), else ``None``.

    Reading a benchmark's files may raise :class:`trace_gym.data.DataDirError` (missing
    data) from any method, never from reading the three attributes; making the env that
    offers a source reads nothing it does not need.
    """

    option_key: str
    domain: str | None
    instruction: str | None

    def splits(self) -> tuple[str, ...]: ...

    def default_split(self) -> str: ...

    def task_ids(self, split: str | None = None) -> list[str]: ...

    def reset_options(self, task_id: str) -> dict[str, Any]: ...

    def gold(self, task_id: str) -> Gold | None: ...

    def group(self, task_id: str) -> str: ...

    def task_id_of(self, info: Mapping[str, Any], options: Mapping[str, Any] | None = None) -> str | None: ...


# what a task source must have: the Protocol's attributes, then its methods, in declaration order
_MEMBERS = tuple(TaskSource.__annotations__) + tuple(
    n for n, v in vars(TaskSource).items() if callable(v) and not n.startswith("_"))


def find_task_source(env: Any) -> TaskSource | None:
    """The task source of ``env`` (wrappers looked through), or ``None`` when it offers none.

    A ``task_source`` that lacks part of the Protocol raises :class:`TypeError` naming what is missing.
    """
    inner = getattr(env, "unwrapped", env)
    src = getattr(inner, "task_source", None)
    if src is None:
        return None
    missing = [m for m in _MEMBERS if not hasattr(src, m)]
    if missing:
        raise TypeError(f"{_env_name(env)}: its task_source ({type(src).__name__}) lacks {', '.join(missing)} "
                        "of trace_gym.core.tasks.TaskSource")
    return src


def _env_name(env: Any) -> str:
    spec = getattr(getattr(env, "unwrapped", env), "spec", None) or getattr(env, "spec", None)
    return getattr(spec, "id", None) or type(getattr(env, "unwrapped", env)).__name__


def task_source(env: Any) -> TaskSource:
    """The task source of ``env``; raises :class:`NoTaskSourceError` when it offers none."""
    src = find_task_source(env)
    if src is None:
        raise NoTaskSourceError(
            f"{_env_name(env)} has no task source: give the env a `task_source` property that returns a "
            "trace_gym.core.tasks.TaskSource (task ids per split, reset options, gold reference, groups)"
        )
    return src


def task_groups(source: TaskSource, task_id: str) -> tuple[str, ...]:
    """Every report group ``task_id`` counts in: the source's optional ``groups(task_id)`` when it
    offers one (a task with three categories counts in three groups), else ``(group(task_id),)``."""
    many = getattr(source, "groups", None)
    found = tuple(str(g) for g in many(task_id)) if callable(many) else ()
    return found or (str(source.group(task_id)),)


def tasks_per_group(source: TaskSource, task_ids: list[str], n: int) -> list[str]:
    """The first ``n`` of ``task_ids`` in each report group (a task's ``group()``), in their order: a sample of a
    split that holds every kind of task its source reports on (the first tasks of a split are often all one kind)."""
    if n < 1:
        raise ValueError(f"tasks per group must be >= 1, got {n}")
    taken: dict[str, int] = {}
    out = []
    for t in task_ids:
        g = str(source.group(t))
        if taken.get(g, 0) < n:
            taken[g] = taken.get(g, 0) + 1
            out.append(t)
    return out


def task_source_for(env_id: str, env_kwargs: Mapping[str, Any] | None = None) -> TaskSource:
    """Make ``env_id`` (with ``env_kwargs``) and return its task source.

    Raises :class:`NoTaskSourceError` when the env offers none and Gymnasium's own error
    for an unknown id.  The env is closed; the source stays usable.
    """
    import gymnasium as gym

    env = gym.make(env_id, disable_env_checker=True, **dict(env_kwargs or {}))
    try:
        return task_source(env)
    finally:
        env.close()
