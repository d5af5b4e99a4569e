"""Gold references of the tasks trajectories played, asked of each target env's task source."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.tasks import Gold, NoTaskSourceError, TaskSource, task_source_for

__all__ = ["GoldLookup", "gold_reference"]


class GoldLookup:
    """``lookup(env_id, options, info)``: the task a trajectory played and its gold reference.

    One task source per env id, made once (with ``env_kwargs``).  An env id that is not
    registered or whose env offers no task source has no gold: ``(None, None)``.
    """

    def __init__(self, env_kwargs: Mapping[str, Any] | None = None):
        self.env_kwargs = dict(env_kwargs or {})
        self._sources: dict[str, TaskSource | None] = {}

    def source(self, env_id: str) -> TaskSource | None:
        if env_id not in self._sources:
            import gymnasium as gym

            try:
                self._sources[env_id] = task_source_for(env_id, self.env_kwargs)
            except (gym.error.Error, NoTaskSourceError):
                self._sources[env_id] = None
        return self._sources[env_id]

    def __call__(self, env_id: str, options: Mapping[str, Any] | None, info: Mapping[str, Any] | None) -> tuple[str | None, Gold | None]:
        src = self.source(env_id)
        if src is None:
            tid = (options or {}).get("task_id") or (info or {}).get("task_id")
            return (None if tid is None else str(tid)), None
        task_id = src.task_id_of(info or {}, options)
        return task_id, (None if task_id is None else src.gold(task_id))


def gold_reference(env_id: str, task_id: str, env_kwargs: Mapping[str, Any] | None = None) -> Gold | None:
    """The gold reference of task ``task_id`` of ``env_id`` (its task source's :meth:`~TaskSource.gold`)."""
    return task_source_for(env_id, env_kwargs).gold(str(task_id))

