"""Rich rendering of conversations (for ``render_mode="human"`` and the CLI), and tables that fit a terminal."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

__all__ = ["print_transcript", "message_panel", "fit_table", "compact_table", "ci_cell"]

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


def fit_table(table: Table, *names: str) -> Table:
    """Make ``table`` fit a narrow (80-column) terminal without cutting what a user needs to read or copy.

    The columns headed by one of ``names`` (ids, capability and policy names) never wrap,
    so they keep their full width while the others shrink; every column folds a word too
    long for it onto the next line instead of ending it in "…".  Returns ``table``.
    """
    for col in table.columns:
        col.overflow = "fold"
        if str(col.header) in names:
            col.no_wrap = True
    return table


def ci_cell(value: float, low: float, high: float, *notes: str, signed: bool = False) -> str:
    """A number and its 95% interval as one terminal table cell over three lines: ``0.380``, ``[0.27,``,
    ``0.49]`` (``signed`` for differences: ``+0.026``, ``[+0.00,``, ``+0.06]``), then each of ``notes``
    (counts, shares) on a line of its own.  A column of such cells is 7 characters wide, so a table of several
    methods' intervals fits an 80-column terminal (markdown keeps ``0.380 [0.27, 0.49]`` on one line)."""
    sign = "+" if signed else ""
    return "\n".join([f"{value:{sign}.3f}", f"[{low:{sign}.2f},", f"{high:{sign}.2f}]", *notes])


def compact_table(title: str, caption: str | None = None) -> Table:
    """A table for an 80-column terminal: a light box (a rule under the header) and collapsed padding."""
    from rich import box

    return Table(title=title, caption=caption, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
