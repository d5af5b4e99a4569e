"""A flat view of a chat transcript for labeling: agent calls with their results and turns."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["AgentCall", "agent_calls", "assistant_texts", "call_repr"]

# A failed call's result: "Error: ..." (τ²-bench, capability envs) or an exception line such as
# "PermissionError: Wifi cannot be turned on in low battery mode" (ToolSandbox).
_ERROR = re.compile(r"Error\b|[A-Z]\w*(?:Error|Exception): ")


@dataclass(frozen=True)
class AgentCall:
    turn: int  # index of the assistant message in the transcript
    id: str
    name: str
    arguments: dict[str, Any]
    error: bool
    result: str


def call_repr(name: str, arguments: dict[str, Any]) -> str:
    return f"{name}({json.dumps(arguments, sort_keys=True, ensure_ascii=False)})"


def agent_calls(messages: list[dict[str, Any]]) -> list[AgentCall]:
    """Every assistant tool call, paired with its tool result (an error when the result starts like one)."""
    results: dict[str, str] = {}
    for m in messages:
        if m.get("role") == "tool":
            results[m.get("tool_call_id", "")] = m.get("content") or ""
    out = []
    for i, m in enumerate(messages):
        if m.get("role") != "assistant":
            continue
        for tc in m.get("tool_calls") or []:
            fn = tc.get("function", tc)
            raw = fn.get("arguments", {})
            try:
                args = json.loads(raw) if isinstance(raw, str) else dict(raw or {})
            except (json.JSONDecodeError, TypeError):
                args = {}
            res = results.get(tc.get("id", ""), "")
            out.append(AgentCall(i, tc.get("id", ""), fn.get("name", ""), args, _ERROR.match(res) is not None, res))
    return out


def assistant_texts(messages: list[dict[str, Any]]) -> list[tuple[int, str]]:
    return [(i, m["content"]) for i, m in enumerate(messages)
            if m.get("role") == "assistant" and m.get("content") and not m.get("tool_calls")]
