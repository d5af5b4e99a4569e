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
tools), :mod:`.calling` (binding and running), :mod:`.common` (shared helpers).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import device, rapidapi, utilities
from .calling import ToolOutcome, bind_arguments, run_tool
from .common import NOT_GIVEN, DuplicateError, NoDataError, format_exception
from .rapidapi import KnowledgeBase, load_knowledge_base

__all__ = [
    "NOT_GIVEN", "ToolOutcome", "KnowledgeBase", "load_knowledge_base", "run_tool", "bind_arguments",
    "format_exception", "TOOL_FUNCTIONS", "DuplicateError", "NoDataError",
]

TOOL_FUNCTIONS: dict[str, Callable[..., Any]] = {
    name: getattr(module, name)
    for module, names in (
        (device, (
            "add_contact", "modify_contact", "remove_contact", "search_contacts", "get_cellular_service_status",
            "search_messages", "send_message_with_phone_number", "get_current_location",
            "get_location_service_status", "get_wifi_status", "add_reminder", "modify_reminder", "remove_reminder",
            "search_reminder", "get_low_battery_mode_status", "set_cellular_service_status",
            "set_location_service_status", "set_low_battery_mode_status", "set_wifi_status",
        )),
        (rapidapi, (
            "convert_currency", "search_lat_lon", "search_location_around_lat_lon", "search_stock",
            "search_weather_around_lat_lon",
        )),
        (utilities, (
            "end_conversation", "calculate_lat_lon_distance", "datetime_info_to_timestamp", "get_current_timestamp",
            "search_holiday", "seconds_to_hours_minutes_seconds", "shift_timestamp", "timestamp_diff",
            "timestamp_to_datetime_info", "unit_conversion",
        )),
    )
    for name in names
}
