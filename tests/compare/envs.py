"""A test target for the comparison: the notes env, its tasks named by a ``task_id`` option."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from tests.helpers_envs import TASKS, NotesEnv
from trace_gym.core.tasks import Gold, UnknownSplitError, UnknownTaskError

ENV_ID = "trace-test/compare-notes-v0"
MAGIC = "Always save the note with write_note before replying."


class TaskIdNotesEnv(NotesEnv):
    """``reset(options={"task_id": "2"})`` plays notes task 2 (what the evaluation harness sends)."""

    def _start(self, options: dict[str, Any]):
        opts = dict(options)
        if "task_id" in opts:
            tid = opts.pop("task_id")
            if not str(tid).isdigit() or not 0 <= int(tid) < len(TASKS):
                raise ValueError(f"task_id must name a task 0..{len(TASKS) - 1}, got {tid!r}")
            opts["task"] = int(tid)
        return super()._start(opts)

    @property
    def task_source(self) -> NotesTasks:
        return NotesTasks()


class NotesTasks:
    """The notes tasks "0".."3" in one split (what the evaluation harness and GEPA ask)."""

    option_key = "task_id"
    domain = None
    instruction = None

    def splits(self):
        return ("all",)

    def default_split(self):
        return "all"

    def task_ids(self, split=None):
        if split not in (None, "all"):
            raise UnknownSplitError(f"the notes env has no split {split!r}; its splits are ['all']")
        return [str(i) for i in range(len(TASKS))]

    def _check(self, task_id):
        if str(task_id) not in self.task_ids():
            raise UnknownTaskError(f"the notes env has no task {task_id!r}")

    def reset_options(self, task_id):
        self._check(task_id)
        return {"task_id": str(task_id)}

    def gold(self, task_id):
        self._check(task_id)
        t = TASKS[int(task_id)]
        return Gold(({"name": "write_note", "arguments": dict(t)},), frozenset({"write_note"}))

    def group(self, task_id):
        self._check(task_id)
        return "notes"

    def task_id_of(self, info, options=None):
        tid = (options or {}).get("task_id")
        return None if tid is None else str(tid)


if ENV_ID not in gym.registry:
    gym.register(id=ENV_ID, entry_point=f"{__name__}:TaskIdNotesEnv")


class InstructionFollower:
    """A deterministic agent that solves the task only when its system prompt contains :data:`MAGIC`."""

    policy_id = "follower"

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        from trace_gym.core import format_tool_call

        system = next((m["content"] for m in messages if m["role"] == "system"), "")
        wrote = any(m.get("role") == "tool" and m.get("name") == "write_note" for m in messages)
        if MAGIC in system and not wrote:
            first = next(m["content"] for m in messages if m["role"] == "user")
            key = first.split("called '")[1].split("'")[0]
            text = first.split("text '")[1].split("'")[0]
            return format_tool_call("write_note", {"key": key, "text": text})
        return "Done."
