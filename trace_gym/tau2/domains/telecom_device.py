"""The telecom user's phone as data: enumerations, APN settings validation and device-state helpers.

:mod:`.telecom_user` builds the user's tools on these; every function here works on a
device dict of the canonical user DB (see :mod:`.telecom_db`) and reproduces τ²'s
texts and rules exactly.
"""

from __future__ import annotations

from typing import Any

from ..validation import ValidationError
from .telecom_db import default_apn_settings

__all__ = [
    "APN_NAMES", "Device", "MODE_TECH", "NETWORK_MODES", "NETWORK_STATUSES", "PERFORMANCE_NAMES",
    "SIGNAL_FACTOR", "SIGNAL_ICONS", "SIM_TEXTS", "SPEED_ADVICE", "TECH_SPEED", "drop_vpn", "drop_wifi",
    "granted_permissions", "sim_status", "validate_apn_settings", "vpn_repr",
]

Device = dict[str, Any]

# Enumerations, in declaration order (the order matters in messages).
NETWORK_MODES = ("4g_5g_preferred", "4g_only", "3g_only", "2g_only")
PERFORMANCE_NAMES = {"unknown": "UNKNOWN", "poor": "POOR", "fair": "FAIR", "good": "GOOD", "excellent": "EXCELLENT"}
NETWORK_STATUSES = ("connected", "searching", "no_service", "emergency_only")
APN_NAMES = ("internet", "broken")

SIGNAL_ICONS = {
    "none": "📵 No Signal",
    "poor": "📶¹ Poor",
    "fair": "📶² Fair",
    "good": "📶³ Good",
    "excellent": "📶⁴ Excellent",
}
# (min, max) Mbps per connected technology, and the share of it each signal level gives.
TECH_SPEED = {"2G": (0.1, 0.4), "3G": (1.0, 5.0), "4G": (10.0, 100.0), "5G": (50.0, 500.0), "none": (0.0, 0.0)}
SIGNAL_FACTOR = {"poor": 0.2, "fair": 0.5, "good": 0.8, "excellent": 1.0, "none": 0.0}
SPEED_ADVICE = {
    "Very Poor": "Connection is very slow. Basic web browsing might be difficult.",
    "Poor": "Connection is slow. Web browsing may be sluggish, streaming difficult.",
    "Fair": "Connection is okay for web browsing and some standard definition streaming.",
    "Good": "Connection is good for most activities, including HD streaming.",
    "Excellent": "Connection is very fast.",
}
# The one technology a restricted network mode connects to (any other mode falls back to 4G).
MODE_TECH = {"4g_only": "4G", "3g_only": "3G", "2g_only": "2G"}

# --------------------------------------------------------------------------- APN validation
_TRUE_WORDS = {"1", "on", "t", "true", "y", "yes"}
_FALSE_WORDS = {"0", "off", "f", "false", "n", "no"}


def _as_bool(value: Any) -> tuple[Any, tuple[str, str] | None]:
    if isinstance(value, bool):
        return value, None
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value), None
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE_WORDS:
            return True, None
        if word in _FALSE_WORDS:
            return False, None
        return None, ("bool_parsing", "Input should be a valid boolean, unable to interpret input")
    return None, ("bool_type", "Input should be a valid boolean")


def _as_optional_str(value: Any) -> tuple[Any, tuple[str, str] | None]:
    if value is None or isinstance(value, str):
        return value, None
    return None, ("string_type", "Input should be a valid string")


def _as_optional_int(value: Any) -> tuple[Any, tuple[str, str] | None]:
    if value is None:
        return None, None
    if isinstance(value, bool):
        return int(value), None
    if isinstance(value, int):
        return value, None
    if isinstance(value, float):
        if value.is_integer():
            return int(value), None
        return None, ("int_from_float", "Input should be a valid integer, got a number with a fractional part")
    if isinstance(value, str):
        try:
            return int(value.strip()), None
        except ValueError:
            return None, ("int_parsing", "Input should be a valid integer, unable to parse string as an integer")
    return None, ("int_type", "Input should be a valid integer")


def _as_apn_name(value: Any) -> tuple[Any, tuple[str, str] | None]:
    if isinstance(value, str) and value in APN_NAMES:
        return value, None
    return None, ("enum", "Input should be 'internet' or 'broken'")


_APN_FIELD_CHECKS = {
    "apn_name": _as_apn_name,
    "reset_at_reboot": _as_bool,
    "mms_apn": _as_optional_str,
    "mmsc_url": _as_optional_str,
    "mms_proxy": _as_optional_str,
    "mms_port": _as_optional_int,
}


def validate_apn_settings(raw: dict[str, Any]) -> dict[str, Any]:
    """A full APN settings record from ``raw`` with pydantic's lax coercions, or :class:`ValidationError`.

    Like τ²'s ``APNSettings(**raw)``: every bad field and every unknown key is one error.
    """
    settings = default_apn_settings()
    errors: list[tuple[str, str, str, Any]] = []
    for name, check in _APN_FIELD_CHECKS.items():
        if name not in raw:
            continue
        value, err = check(raw[name])
        if err is None:
            settings[name] = value
        else:
            errors.append((name, err[1], err[0], raw[name]))
    errors.extend(
        (name, "Extra inputs are not permitted", "extra_forbidden", value)
        for name, value in raw.items()
        if name not in _APN_FIELD_CHECKS
    )
    if errors:
        raise ValidationError("APNSettings", errors)
    return settings


# --------------------------------------------------------------------------- device state
SIM_TEXTS = {
    "active": "Your SIM card is active and working.",
    "missing": "No SIM card detected in the phone.",
    "locked_pin": "The SIM card is locked with a PIN code.",
    "locked_puk": "The SIM card is locked with a PUK code.",
}


def sim_status(dev: Device) -> str:
    return "missing" if dev["sim_card_missing"] else dev["sim_card_status"]


def drop_wifi(dev: Device) -> None:
    dev["wifi_connected"] = False
    dev["wifi_ssid"] = None
    dev["wifi_signal_strength"] = "none"


def drop_vpn(dev: Device) -> bool:
    if not dev["vpn_connected"]:
        return False
    dev["vpn_connected"] = False
    dev["vpn_details"] = None
    return True


def granted_permissions(app: dict[str, Any]) -> list[str]:
    return [name.replace("_", " ").lower() for name, allowed in app["permissions"].items() if allowed]


def vpn_repr(details: dict[str, Any]) -> str:
    """The Python ``repr`` of a VPN details dump, enum member included, as the corpus shows it."""
    perf = details["server_performance"]
    perf_repr = f"<PerformanceLevel.{PERFORMANCE_NAMES[perf]}: {perf!r}>" if perf in PERFORMANCE_NAMES else repr(perf)
    return (
        "{"
        f"'server_address': {details['server_address']!r}, "
        f"'protocol': {details['protocol']!r}, "
        f"'server_performance': {perf_repr}"
        "}"
    )
