"""The 34 ToolSandbox tools: one implementation each, over an injected world.

Every tool is a plain function ``fn(world, kb, **arguments)`` that behaves like the
upstream tool of the same name: the same argument binding and type checks, the same
preconditions (cellular, wifi, low battery mode, location service, ...), the same fuzzy
matching and the same exceptions.  ``world`` is a
:class:`~trace_gym.toolsandbox.world.World` (the four databases, the frozen clock, the id
source) and ``kb`` the offline RapidAPI :class:`~trace_gym.toolsandbox.tools.rapidapi.KnowledgeBase`.

* :data:`TOOL_FUNCTIONS` -- every implementation by name;
* :func:`run_tool` -- call one like upstream's execution environment (never raises);
* :class:`trace_gym.toolsandbox.toolbox.ToolBox` -- the tools bound to one world, as a
  Gymnasium env needs them.

Modules: :mod:`.device` (settings, location, contacts, messaging, reminders),
:mod:`.utilities` (clock, units, distance, holidays), :mod:`.rapidapi` (the five web
tools), :mod:`.calling` (binding and running), :mod:`.table` (every implementation by name), :mod:`.common`
(shared helpers).
"""

from __future__ import annotations

from .calling import ToolOutcome, bind_arguments, run_tool
from .common import NOT_GIVEN, DuplicateError, NoDataError, format_exception
from .rapidapi import KnowledgeBase, load_knowledge_base
from .table import TOOL_FUNCTIONS

__all__ = [
    "NOT_GIVEN", "ToolOutcome", "KnowledgeBase", "load_knowledge_base", "run_tool", "bind_arguments",
    "format_exception", "TOOL_FUNCTIONS", "DuplicateError", "NoDataError",
]
