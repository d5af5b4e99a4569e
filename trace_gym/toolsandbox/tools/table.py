"""Every ToolSandbox tool implementation by its upstream name (:data:`TOOL_FUNCTIONS`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import device, rapidapi, utilities

__all__ = ["TOOL_FUNCTIONS"]

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
