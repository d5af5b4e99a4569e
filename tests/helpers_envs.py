"""A tiny, test-only ``ToolEnv``: a notes app with a read tool, a write tool and a scripted user.

Importing this module registers it as ``trace-test/notes-v0`` (never under ``trace/``),
so ``gym.make("tests.helpers_envs:trace-test/notes-v0")`` works from a fresh process.

The user asks the agent to store one note (chosen with ``self.np_random`` or the
``task`` option).  After each agent message the user checks the notes: when the
requested note is stored it says goodbye and ends the conversation, otherwise it
repeats the request, and gives up after ``patience`` messages.  The reward is 1.0
when the stored notes equal the expected notes.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from trace_gym.core import EpisodeOpening, Tool, ToolEnv, ToolError, ToolSet

ENV_ID = "trace-test/notes-v0"

TASKS: list[dict[str, str]] = [
    {"key": "groceries", "text": "milk, eggs"},
    {"key": "todo", "text": "call the bank"},
    {"key": "travel", "text": "train at 9:15"},
    {"key": "gift", "text": "book for Ana"},
]

# Pre-existing notes, so the read tool has something to show.
INITIAL_NOTES = {"welcome": "hello"}


class NotesEnv(ToolEnv):
    """Store one note for a scripted user."""

    def __init__(self, *, patience: int = 3, max_steps: int = 12, render_mode: str | None = None):
        super().__init__(max_steps=max_steps, render_mode=render_mode)
        self.patience = patience
        self.notes: dict[str, str] = {}
        self.task: dict[str, str] = TASKS[0]
        self.user_turns = 0

    # -- tools ---------------------------------------------------------------
    def _read_note(self, key: str) -> str:
        if key not in self.notes:
            raise ToolError(f"no note named {key!r}")
        return self.notes[key]

    def _write_note(self, key: str, text: str) -> str:
        if not key.strip():
            raise ToolError("the key must not be blank")
        self.notes[key] = text
        return f"saved note {key!r}"

    def _toolset(self) -> ToolSet:
        return ToolSet(
            [
                Tool(
                    "read_note",
                    "Read the note stored under a key.",
                    {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
                    self._read_note,
                    kind="read",
                ),
                Tool(
                    "write_note",
                    "Store (or overwrite) a note under a key.",
                    {
                        "type": "object",
                        "properties": {"key": {"type": "string"}, "text": {"type": "string"}},
                        "required": ["key", "text"],
                    },
                    self._write_note,
                    kind="write",
                ),
            ]
        )

    # -- hooks ---------------------------------------------------------------
    def _start(self, options: dict[str, Any]) -> EpisodeOpening:
        if "task" in options:
            idx = options["task"]
            if not isinstance(idx, int) or not 0 <= idx < len(TASKS):
                raise ValueError(f"option task must be an int in 0..{len(TASKS) - 1}, got {idx!r}")
        else:
            idx = int(self.np_random.integers(0, len(TASKS)))
        self.task = TASKS[idx]
        self.notes = dict(INITIAL_NOTES)
        self.user_turns = 0
        first = f"Please save a note called {self.task['key']!r} with the text {self.task['text']!r}."
        return EpisodeOpening(
            system_prompt="You are a notes assistant. Use the tools to read and write notes.",
            tools=self._toolset(),
            messages=[{"role": "user", "content": first}],
            info={"task_index": idx},
        )

    def _done_task(self) -> bool:
        return self.notes.get(self.task["key"]) == self.task["text"]

    def _respond(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        self.user_turns += 1
        if self._done_task():
            self.end("user_stop")
            return [{"role": "user", "content": "Thanks, that's all. ###STOP###"}]
        if self.user_turns >= self.patience:
            self.end("user_gave_up")
            return [{"role": "user", "content": "Never mind. ###STOP###"}]
        return [{"role": "user", "content": f"The note {self.task['key']!r} is still missing, please save it."}]

    def _evaluate(self) -> tuple[float, dict[str, Any]]:
        expected = dict(INITIAL_NOTES)
        expected[self.task["key"]] = self.task["text"]
        db = 1.0 if self.notes == expected else 0.0
        return db, {"db_match": db, "user_turns": self.user_turns}


def register() -> None:
    """Register :data:`ENV_ID` (idempotent)."""
    if ENV_ID not in gym.registry:
        gym.register(id=ENV_ID, entry_point=f"{__name__}:NotesEnv")


def solve_actions(task_index: int, style: str = "hermes") -> list[str]:
    """A script that solves task ``task_index``: read, write, then tell the user."""
    from trace_gym.core import format_tool_call

    t = TASKS[task_index]
    return [
        format_tool_call("read_note", {"key": "welcome"}, style=style),
        format_tool_call("write_note", {"key": t["key"], "text": t["text"]}, style=style),
        f"Done: I saved {t['key']!r}.",
    ]


register()


def solver(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
    """A stateless policy function: save the requested note, then tell the user."""
    import re

    from trace_gym.core import format_tool_call

    request = next(m["content"] for m in messages if m["role"] == "user")
    match = re.search(r"called '([^']*)' with the text '([^']*)'", request)
    if match is None:
        return "I could not understand the request."
    if not any(m.get("tool_calls") for m in messages):
        return format_tool_call("write_note", {"key": match.group(1), "text": match.group(2)})
    return f"Saved {match.group(1)!r}."
