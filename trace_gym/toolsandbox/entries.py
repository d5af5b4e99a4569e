"""Gymnasium ids of the ToolSandbox family (collected by :mod:`trace_gym.registration`)."""

from __future__ import annotations

from trace_gym.registration import EnvEntry

ENV_ENTRIES: list[EnvEntry] = [
    EnvEntry(
        id="trace/toolsandbox-v0",
        entry_point="trace_gym.toolsandbox.env:ToolSandboxEnv",
        description="ToolSandbox base scenarios (129): stateful tools, offline (default), scripted or LLM user, upstream milestone scoring",
        kwargs={},
        family="toolsandbox",
        domain="toolsandbox",
    ),
]
