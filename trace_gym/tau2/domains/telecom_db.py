"""Telecom data layout: field order and defaults of every record, normalisers, tau2's view.

The agent database (plans, customers, lines, bills, devices) and the user's phone
(``device`` + ``surroundings``) are kept as nested ``dict``/``list`` values in the
*canonical* form of the τ² data files: every model field present, keys in model-field
order, enums as their string values and dates as ISO strings.  The canonical hash is
then plain ``json.dumps``; tau2's own hash and the models in tool results differ in one
point only, handled by :func:`tau2_view`: agent-DB ``datetime`` fields print with a
space instead of ``T`` (``str(datetime)``).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "REQUIRED",
    "normalise_agent_db",
    "normalise_user_db",
    "tau2_view",
    "default_apn_settings",
    "default_app_statuses",
]


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()

# --------------------------------------------------------------------------- field layouts
# (field, default) in model order; REQUIRED marks fields without a default.
ADDRESS = (("street", REQUIRED), ("city", REQUIRED), ("state", REQUIRED), ("zip_code", REQUIRED))
PLAN = (
    ("plan_id", REQUIRED),
    ("name", REQUIRED),
    ("data_limit_gb", REQUIRED),
    ("price_per_month", REQUIRED),
    ("data_refueling_price_per_gb", REQUIRED),
)
DEVICE = (
    ("device_id", REQUIRED),
    ("device_type", REQUIRED),
    ("model", REQUIRED),
    ("imei", None),
    ("is_esim_capable", REQUIRED),
    ("activated", False),
    ("activation_date", None),
    ("last_esim_transfer_date", None),
)
LINE = (
    ("line_id", REQUIRED),
    ("phone_number", REQUIRED),
    ("status", "Pending Activation"),
    ("plan_id", REQUIRED),
    ("device_id", None),
    ("data_used_gb", 0.0),
    ("data_refueling_gb", 0.0),
    ("roaming_enabled", False),
    ("contract_end_date", None),
    ("last_plan_change_date", None),
    ("last_sim_replacement_date", None),
    ("suspension_start_date", None),
)
LINE_ITEM = (("description", REQUIRED), ("amount", REQUIRED), ("date", REQUIRED), ("item_type", REQUIRED))
BILL = (
    ("bill_id", REQUIRED),
    ("customer_id", REQUIRED),
    ("period_start", REQUIRED),
    ("period_end", REQUIRED),
    ("issue_date", REQUIRED),
    ("total_due", REQUIRED),
    ("due_date", REQUIRED),
    ("line_items", list),
    ("status", "Draft"),
)
PAYMENT_METHOD = (("method_type", REQUIRED), ("account_number_last_4", REQUIRED), ("expiration_date", REQUIRED))
CUSTOMER = (
    ("customer_id", REQUIRED),
    ("full_name", REQUIRED),
    ("date_of_birth", REQUIRED),
    ("email", REQUIRED),
    ("phone_number", REQUIRED),
    ("address", REQUIRED),
    ("account_status", "Pending Verification"),
    ("payment_methods", list),
    ("line_ids", list),
    ("bill_ids", list),
    ("created_at", "2025-01-01"),
    ("last_extension_date", None),
    ("goodwill_credit_used_this_year", 0.0),
)
AGENT_DB = (("plans", list), ("customers", list), ("lines", list), ("bills", list), ("devices", list))

# Agent-DB fields typed ``datetime``: tau2's hash and tool results print them with a space.
CUSTOMER_DATETIME_FIELDS = ("created_at",)
DEVICE_DATETIME_FIELDS = ("activation_date", "last_esim_transfer_date")

APN_SETTINGS = (
    ("apn_name", "internet"),
    ("reset_at_reboot", False),
    ("mms_apn", "mms"),
    ("mmsc_url", "http://mms.carrier.com/mms/wapenc"),
    ("mms_proxy", None),
    ("mms_port", None),
)
APP_PERMISSIONS = (("sms", False), ("storage", False), ("phone", False), ("network", False))
VPN_DETAILS = (("server_address", None), ("protocol", None), ("server_performance", "unknown"))
PAYMENT_REQUEST = (("bill_id", REQUIRED), ("amount_due", REQUIRED), ("paid", False))


def default_apn_settings() -> dict[str, Any]:
    return {k: v for k, v in APN_SETTINGS}


def default_app_statuses() -> dict[str, Any]:
    return {
        "messaging": {"app_name": "messaging", "permissions": {"sms": True, "storage": True, "phone": True, "network": False}},
        "browser": {"app_name": "browser", "permissions": {"sms": False, "storage": True, "phone": False, "network": True}},
    }


def _default_signal_strength() -> dict[str, str]:
    return {"2G": "poor", "3G": "fair", "4G": "good", "5G": "excellent"}


DEVICE_STATE = (
    ("sim_card_status", "active"),
    ("sim_card_missing", False),
    ("airplane_mode", False),
    ("network_signal_strength", "good"),
    ("network_technology_connected", "5G"),
    ("network_connection_status", "connected"),
    ("battery_level", 80),
    ("data_enabled", True),
    ("roaming_enabled", False),
    ("network_mode_preference", "4g_5g_preferred"),
    ("active_apn_settings", default_apn_settings),
    ("wifi_enabled", False),
    ("wifi_connected", False),
    ("wifi_ssid", None),
    ("wifi_signal_strength", "none"),
    ("wifi_calling_enabled", False),
    ("wifi_calling_mms_over_wifi", False),
    ("data_saver_mode", False),
    ("vpn_enabled_setting", False),
    ("vpn_connected", False),
    ("vpn_details", None),
    ("app_statuses", default_app_statuses),
)
SURROUNDINGS = (
    ("name", None),
    ("phone_number", None),
    ("is_abroad", False),
    ("roaming_allowed", False),
    ("signal_strength", _default_signal_strength),
    ("mobile_data_usage_exceeded", False),
    ("line_active", True),
    ("payment_request", None),
)


# --------------------------------------------------------------------------- normalising
def _fill(raw: dict[str, Any], layout: tuple[tuple[str, Any], ...], where: str) -> dict[str, Any]:
    """Return ``raw`` with keys in ``layout`` order and missing defaults filled; reject unknown keys."""
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: expected an object, got {type(raw).__name__}")
    known = {name for name, _ in layout}
    extra = [k for k in raw if k not in known]
    if extra:
        raise ValueError(f"{where}: unknown field(s) {extra}")
    out: dict[str, Any] = {}
    for name, default in layout:
        if name in raw:
            out[name] = raw[name]
        elif default is REQUIRED:
            raise ValueError(f"{where}: missing required field {name!r}")
        else:
            out[name] = default() if callable(default) else default
    return out


def _fill_list(raw: Any, layout: tuple[tuple[str, Any], ...], where: str) -> list[dict[str, Any]]:
    if not isinstance(raw, list):
        raise ValueError(f"{where}: expected a list, got {type(raw).__name__}")
    return [_fill(item, layout, f"{where}[{i}]") for i, item in enumerate(raw)]


def normalise_agent_db(raw: dict[str, Any]) -> dict[str, Any]:
    """The canonical agent DB from parsed ``db.toml`` data (a new structure; ``raw`` is not modified)."""
    db = _fill(raw, AGENT_DB, "telecom db")
    db["plans"] = _fill_list(db["plans"], PLAN, "plans")
    db["devices"] = _fill_list(db["devices"], DEVICE, "devices")
    db["lines"] = _fill_list(db["lines"], LINE, "lines")
    bills = _fill_list(db["bills"], BILL, "bills")
    for i, bill in enumerate(bills):
        bill["line_items"] = _fill_list(bill["line_items"], LINE_ITEM, f"bills[{i}].line_items")
    db["bills"] = bills
    customers = _fill_list(db["customers"], CUSTOMER, "customers")
    for i, cust in enumerate(customers):
        cust["address"] = _fill(cust["address"], ADDRESS, f"customers[{i}].address")
        cust["payment_methods"] = _fill_list(cust["payment_methods"], PAYMENT_METHOD, f"customers[{i}].payment_methods")
        cust["line_ids"] = list(cust["line_ids"])
        cust["bill_ids"] = list(cust["bill_ids"])
    db["customers"] = customers
    return db


def normalise_user_db(raw: dict[str, Any]) -> dict[str, Any]:
    """The canonical user (phone) DB from parsed ``user_db.toml`` data."""
    top = _fill(raw, (("device", dict), ("surroundings", dict)), "telecom user db")
    device = _fill(top["device"], DEVICE_STATE, "device")
    device["active_apn_settings"] = _fill(device["active_apn_settings"], APN_SETTINGS, "device.active_apn_settings")
    if device["vpn_details"] is not None:
        device["vpn_details"] = _fill(device["vpn_details"], VPN_DETAILS, "device.vpn_details")
    apps = {}
    for name, app in device["app_statuses"].items():
        app = _fill(app, (("app_name", REQUIRED), ("permissions", dict)), f"device.app_statuses.{name}")
        app["permissions"] = _fill(app["permissions"], APP_PERMISSIONS, f"device.app_statuses.{name}.permissions")
        apps[name] = app
    device["app_statuses"] = apps
    surroundings = _fill(top["surroundings"], SURROUNDINGS, "surroundings")
    surroundings["signal_strength"] = dict(surroundings["signal_strength"])
    if surroundings["payment_request"] is not None:
        surroundings["payment_request"] = _fill(surroundings["payment_request"], PAYMENT_REQUEST, "surroundings.payment_request")
    return {"device": device, "surroundings": surroundings}


# --------------------------------------------------------------------------- tau2's view
def _spaced(value: Any) -> Any:
    """``str(datetime)`` from an ISO string: the date/time separator becomes a space."""
    if isinstance(value, str) and len(value) > 10 and value[10] == "T":
        return value[:10] + " " + value[11:]
    return value


def _with_spaced(record: Any, fields: tuple[str, ...]) -> Any:
    if not isinstance(record, dict):
        return record
    out = dict(record)
    for f in fields:
        if f in out:
            out[f] = _spaced(out[f])
    return out


_DATETIME_FIELDS = {"customers": CUSTOMER_DATETIME_FIELDS, "devices": DEVICE_DATETIME_FIELDS}


def tau2_view(collection: str, value: Any) -> Any:
    """A customer/device record (or a whole list of them) as tau2 prints it: datetimes with a space.

    Used for tau2's own DB hash and for tool results that return these models.
    """
    fields = _DATETIME_FIELDS.get(collection)
    if fields is None:
        return value
    if isinstance(value, list):
        return [_with_spaced(r, fields) for r in value]
    return _with_spaced(value, fields)
