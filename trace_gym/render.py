"""Rich rendering of conversations (for ``render_mode="human"`` and the CLI)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.text import Text

__all__ = ["print_transcript", "message_panel"]

_STYLES = {"system": "dim", "user": "cyan", "assistant": "green", "tool": "yellow"}


def message_panel(m: dict[str, Any]) -> Panel:
    role = m["role"]
    title = role
    body = m.get("content") or ""
    if role == "tool":
        title = f"tool · {m.get('name') or m.get('tool_call_id')}"
    if role == "assistant" and m.get("tool_calls"):
        calls = "\n".join(f"→ {tc['function']['name']}({tc['function']['arguments']})" for tc in m["tool_calls"])
        body = f"{body}\n{calls}".strip()
        title = "assistant · tool call"
    if m.get("name") == "env_feedback":
        title = "env · format error"
    if role == "system" and len(body) > 600:
        body = body[:600] + f"\n… ({len(body) - 600} more characters)"
    return Panel(Text(body), title=title, title_align="left", border_style=_STYLES.get(role, "white"))


def print_transcript(messages: list[dict[str, Any]], console: Console | None = None) -> None:
    console = console or Console()
    for m in messages:
        console.print(message_panel(m))
