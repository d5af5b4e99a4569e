"""The 34 ToolSandbox tools, run against a :class:`~trace_gym.toolsandbox.world.World`.

Every tool is a plain function ``fn(world, kb, **arguments)`` that behaves like the
upstream tool of the same name: the same argument binding and type checks, the same
preconditions (cellular, wifi, low battery mode, location service, ...), the same
fuzzy matching and the same exceptions.  :func:`run_tool` binds the arguments the way
upstream's decorator does and returns a :class:`ToolOutcome`: the result and the
traced arguments, or the one-line error text the agent sees (the last line of a Python
traceback, e.g. ``ConnectionError: Cellular service is not enabled``).

The five web tools answer from the offline RapidAPI knowledge base of ``tools.json``
(:class:`KnowledgeBase`).  Times are UTC; "now" is the world's frozen clock.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from rapidfuzz import fuzz, process
from rapidfuzz import utils as fuzz_utils

from .world import NoDataError as _WorldNoData
from .world import World

__all__ = [
    "NOT_GIVEN", "ToolSpec", "ToolOutcome", "KnowledgeBase", "load_tool_specs", "load_knowledge_base",
    "run_tool", "format_exception", "TOOL_FUNCTIONS", "DuplicateError", "NoDataError",
]

_UTC = _dt.UTC


class _NotGiven:
    """Sentinel for "argument not passed" (upstream's ``NOT_GIVEN``)."""

    def __repr__(self) -> str:
        return "NOT_GIVEN"

    def __bool__(self) -> bool:
        return False


NOT_GIVEN: Any = _NotGiven()


class DuplicateError(Exception):
    """Upstream raises polars' ``DuplicateError``; same qualified name in error lines."""


class NoDataError(Exception):
    """Upstream raises polars' ``NoDataError``; same qualified name in error lines."""


DuplicateError.__module__ = "polars.exceptions"
NoDataError.__module__ = "polars.exceptions"


def format_exception(exc: BaseException) -> str:
    """The last line of the traceback Python would print for ``exc``."""
    lines = traceback.format_exception_only(type(exc), exc)
    text = "".join(lines).rstrip().split("\n")
    return text[-1]


# ---------------------------------------------------------------------------- specs and binding
@dataclass(frozen=True)
class Param:
    name: str
    annotation: str  # as written in upstream's signature
    default: Any  # NOT_GIVEN sentinel, a value, or _REQUIRED
    allowed: frozenset[type]


_REQUIRED: Any = object()

_TYPE_NAMES: dict[str, type] = {
    "str": str, "int": int, "float": float, "bool": bool, "None": type(None), "NoneType": type(None),
    "tool_sandbox.common.utils.NotGiven": _NotGiven,
}


def _split_top(text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def _allowed_types(ann: str) -> frozenset[type]:
    ann = ann.strip()
    m = re.fullmatch(r"(Optional|Union)\[(.*)\]", ann)
    if m:
        out: set[type] = set()
        for part in _split_top(m.group(2)):
            out |= _allowed_types(part)
        if m.group(1) == "Optional":
            out.add(type(None))
        return frozenset(out)
    return frozenset({_TYPE_NAMES.get(ann, object)})


def _expected_repr(ann: str) -> str:
    if ann in ("str", "int", "float", "bool"):
        return f"<class '{ann}'>"
    return f"typing.{ann}"


@dataclass(frozen=True)
class ToolSpec:
    """One tool as the agent sees it plus what the engine needs to call it like upstream."""

    name: str
    schema: dict[str, Any]  # the OpenAI function schema
    params: tuple[Param, ...]
    visible_to: tuple[str, ...]
    typechecked: bool
    augmented_views: dict[str, Any] = field(default_factory=dict)

    @property
    def description(self) -> str:
        return self.schema["function"].get("description", "")


# Tools whose upstream body is not wrapped in the type checker.
_UNCHECKED = frozenset({
    "search_contacts", "get_cellular_service_status", "get_current_location", "get_location_service_status",
    "get_wifi_status", "get_low_battery_mode_status", "set_cellular_service_status", "set_location_service_status",
    "set_low_battery_mode_status", "set_wifi_status", "end_conversation",
})


def _parse_params(signature: str) -> tuple[Param, ...]:
    inner = signature[signature.index("(") + 1 : signature.rindex(")")]
    params = []
    for part in _split_top(inner):
        name, _, rest = part.partition(":")
        ann, eq, default_text = rest.partition("=")
        ann = ann.strip()
        if eq:
            d = default_text.strip()
            default: Any = NOT_GIVEN if d == "NOT_GIVEN" else json.loads({"None": "null", "False": "false", "True": "true"}.get(d, d))
        else:
            default = _REQUIRED
        params.append(Param(name.strip(), ann, default, _allowed_types(ann)))
    return tuple(params)


def load_tool_specs(tools_json: dict[str, Any]) -> dict[str, ToolSpec]:
    """``{name: ToolSpec}`` in upstream discovery order."""
    by_name = {t["name"]: t for t in tools_json["tools"]}
    specs = {}
    for name in tools_json["discovery_order"]:
        t = by_name[name]
        specs[name] = ToolSpec(
            name=name,
            schema=t["openai_schema"],
            params=_parse_params(t["python_signature"]),
            visible_to=tuple(t.get("visible_to") or ("AGENT",)),
            typechecked=name not in _UNCHECKED,
            augmented_views=t.get("augmented_views") or {},
        )
    return specs


def _check_type(value: Any, name: str, annotation: str, allowed: frozenset[type]) -> None:
    if object in allowed or type(value) in allowed:
        return
    if isinstance(value, int) and float in allowed:
        return
    if isinstance(value, bool) and (int in allowed or float in allowed):
        return
    raise TypeError(f"Parameter '{name}' is of type '{type(value)}', but expected '{_expected_repr(annotation)}'.")


def _bind(spec: ToolSpec, arguments: dict[str, Any]) -> dict[str, Any]:
    """Python's ``Signature.bind`` + ``apply_defaults``, with its error texts."""
    left = dict(arguments)
    bound: dict[str, Any] = {}
    for p in spec.params:
        if p.name in left:
            bound[p.name] = left.pop(p.name)
        elif p.default is _REQUIRED:
            raise TypeError(f"missing a required argument: {p.name!r}")
        else:
            bound[p.name] = p.default
    if left:
        raise TypeError(f"got an unexpected keyword argument {next(iter(left))!r}")
    return bound


@dataclass(frozen=True)
class ToolOutcome:
    """What one call produced: ``result`` and ``trace_arguments``, or ``error`` (the agent-visible line)."""

    result: Any = None
    trace_arguments: dict[str, Any] | None = None
    error: str | None = None

    @property
    def content(self) -> str:
        return self.error if self.error is not None else repr(self.result)


def run_tool(spec: ToolSpec, world: World, kb: KnowledgeBase, arguments: dict[str, Any]) -> ToolOutcome:
    """Call one tool like upstream's execution environment; never raises for bad input."""
    try:
        bound = _bind(spec, arguments)
        if spec.typechecked:
            for p in spec.params:
                _check_type(bound[p.name], p.name, p.annotation, p.allowed)
        result = TOOL_FUNCTIONS[spec.name](world, kb, **bound)
    except _WorldNoData as exc:
        return ToolOutcome(error=format_exception(NoDataError(str(exc))))
    except Exception as exc:  # every tool failure is shown to the agent as one line
        return ToolOutcome(error=format_exception(exc))
    trace_args = {k: v for k, v in bound.items() if v is not NOT_GIVEN}
    return ToolOutcome(result=result, trace_arguments=trace_args)


# ---------------------------------------------------------------------------- validators
_TS_MIN, _TS_MAX = 315529200.0, 2524604400.0


def _range(value: Any, name: str, lo: float, hi: float) -> None:
    if isinstance(value, (int, float)):
        if value < lo:
            raise ValueError(f"Parameter '{name}' is smaller than its valid range minimum of {lo}.")
        if value > hi:
            raise ValueError(f"Parameter '{name}' is larger than its valid range maximum of {hi}.")


def _timestamp(value: Any, name: str) -> None:
    _range(value, name, _TS_MIN, _TS_MAX)


def _latitude(value: Any, name: str) -> None:
    _range(value, name, -90.0, 90.0)


def _longitude(value: Any, name: str) -> None:
    _range(value, name, -180.0, 180.0)


def _phone(value: Any) -> None:
    if value is NOT_GIVEN:
        return
    import phonenumbers

    phonenumbers.parse(value)


# ---------------------------------------------------------------------------- table filters
def _exact(rows: list[dict[str, Any]], col: str, value: Any) -> list[dict[str, Any]]:
    if value is None:
        return []
    return [r for r in rows if r[col] is not None and r[col] == value]


def _fuzzy(rows: list[dict[str, Any]], col: str, value: Any, threshold: int) -> list[dict[str, Any]]:
    choices = [r[col] for r in rows]
    matches = process.extract(
        value, choices, processor=fuzz_utils.default_process, scorer=fuzz.WRatio, score_cutoff=threshold
    )
    return [rows[m[-1]] for m in matches]


def _ge(rows: list[dict[str, Any]], col: str, value: Any) -> list[dict[str, Any]]:
    return [r for r in rows if r[col] is not None and r[col] >= value]


def _le(rows: list[dict[str, Any]], col: str, value: Any) -> list[dict[str, Any]]:
    return [r for r in rows if r[col] is not None and r[col] <= value]


def _filter(rows: list[dict[str, Any]], criteria: list[tuple[str, Any, Callable[..., list[dict[str, Any]]]]]) -> list[dict[str, Any]]:
    if all(v is NOT_GIVEN for _, v, _ in criteria):
        names = tuple(c for c, _, _ in criteria)
        raise ValueError(
            "No search criteria are given. At least one search criteria should be provided among " f"{names}"
        )
    for col, value, method in criteria:
        if value is not NOT_GIVEN:
            rows = method(rows, col, value)
    return [dict(r) for r in rows]


def _fz(threshold: int) -> Callable[..., list[dict[str, Any]]]:
    return lambda rows, col, value: _fuzzy(rows, col, value, threshold)


# ---------------------------------------------------------------------------- settings
def _get_bool(world: World, name: str) -> bool:
    return bool(world.setting(name))


def _set_bool(world: World, name: str, on: Any) -> None:
    _check_type(on, "on", "bool", frozenset({bool}))
    if bool(world.setting(name)) == on:
        raise ValueError(f"{name} already {('disabled', 'enabled')[int(on)]}")
    world.set_setting(name, not world.setting(name))


def set_low_battery_mode_status(world: World, kb: KnowledgeBase, on: Any) -> None:
    _check_type(on, "on", "bool", frozenset({bool}))
    _set_bool(world, "low_battery_mode", on)
    if on:
        for dependent in ("cellular", "wifi", "location_service"):
            try:
                _set_bool(world, dependent, False)
            except ValueError:
                pass


def get_low_battery_mode_status(world: World, kb: KnowledgeBase) -> bool:
    return _get_bool(world, "low_battery_mode")


def set_location_service_status(world: World, kb: KnowledgeBase, on: Any) -> None:
    if on and _get_bool(world, "low_battery_mode"):
        raise PermissionError("Location service cannot be turned on in low battery mode")
    _set_bool(world, "location_service", on)


def get_location_service_status(world: World, kb: KnowledgeBase) -> bool:
    return _get_bool(world, "location_service")


def set_cellular_service_status(world: World, kb: KnowledgeBase, on: Any) -> None:
    _check_type(on, "on", "bool", frozenset({bool}))
    if on and _get_bool(world, "low_battery_mode"):
        raise PermissionError("Cellular service cannot be turned on in low battery mode")
    _set_bool(world, "cellular", on)


def get_cellular_service_status(world: World, kb: KnowledgeBase) -> bool:
    return _get_bool(world, "cellular")


def set_wifi_status(world: World, kb: KnowledgeBase, on: Any) -> None:
    _check_type(on, "on", "bool", frozenset({bool}))
    if on and _get_bool(world, "low_battery_mode"):
        raise PermissionError("Wifi cannot be turned on in low battery mode")
    _set_bool(world, "wifi", on)


def get_wifi_status(world: World, kb: KnowledgeBase) -> bool:
    return _get_bool(world, "wifi")


def get_current_location(world: World, kb: KnowledgeBase) -> dict[str, float]:
    if not _get_bool(world, "location_service"):
        raise PermissionError("Location service is not enabled.")
    return {"latitude": world.setting("latitude"), "longitude": world.setting("longitude")}


# ---------------------------------------------------------------------------- contacts
def search_contacts(
    world: World, kb: KnowledgeBase, person_id: Any = NOT_GIVEN, name: Any = NOT_GIVEN, phone_number: Any = NOT_GIVEN,
    relationship: Any = NOT_GIVEN, is_self: Any = NOT_GIVEN,
) -> list[dict[str, Any]]:
    _phone(phone_number)
    return _filter(world.rows("CONTACT"), [
        ("person_id", person_id, _exact),
        ("name", name, _fz(90)),
        ("phone_number", phone_number, _exact),
        ("relationship", relationship, _fz(90)),
        ("is_self", is_self, _exact),
    ])


def add_contact(
    world: World, kb: KnowledgeBase, name: str, phone_number: str, relationship: str | None = None, is_self: bool = False
) -> str:
    _phone(phone_number)
    person_id = world.new_id()
    if is_self and search_contacts(world, kb, is_self=True):
        raise DuplicateError("Self entry already exists. Cannot add another one.")
    world.add("CONTACT", [{
        "person_id": person_id, "name": name, "phone_number": phone_number,
        "relationship": relationship, "is_self": is_self,
    }])
    return person_id


def modify_contact(
    world: World, kb: KnowledgeBase, person_id: str, name: Any = NOT_GIVEN, phone_number: Any = NOT_GIVEN,
    relationship: Any = NOT_GIVEN, is_self: Any = NOT_GIVEN,
) -> None:
    if all(x is NOT_GIVEN for x in (name, phone_number, relationship, is_self)):
        raise ValueError(
            "No update information given. At least one new field should be provided among "
            "[name, phone_number, relationship, is_self] in order to modify contact"
        )
    _phone(phone_number)
    selves = search_contacts(world, kb, is_self=True)
    if selves and is_self and selves[0]["person_id"] != person_id:
        raise DuplicateError("Self entry already exists. Cannot add another one.")
    matches = [r for r in world.rows("CONTACT") if r["person_id"] == person_id]
    if not matches:
        raise NoDataError(f"No db entry matching {person_id=} found")
    if len(matches) > 1:
        raise DuplicateError(f"More than 1 entry with {person_id=} found")
    entry = matches[0]
    for key, value in (("name", name), ("phone_number", phone_number), ("relationship", relationship), ("is_self", is_self)):
        if value is not NOT_GIVEN:
            entry[key] = value
    world.remove("CONTACT", "person_id", person_id)
    world.add("CONTACT", [entry])


def remove_contact(world: World, kb: KnowledgeBase, person_id: str) -> None:
    world.remove("CONTACT", "person_id", person_id)


# ---------------------------------------------------------------------------- messaging
def send_message_with_phone_number(world: World, kb: KnowledgeBase, phone_number: str, content: str) -> str:
    _phone(phone_number)
    if not _get_bool(world, "cellular"):
        raise ConnectionError("Cellular service is not enabled")
    message_id = world.new_id()
    selves = search_contacts(world, kb, is_self=True)
    if len(selves) != 1:
        raise DuplicateError(f"1 and only 1 self entry should exist in contacts database, instead found {len(selves)}")
    recipients = search_contacts(world, kb, phone_number=phone_number)
    world.add("MESSAGING", [{
        "message_id": message_id,
        "sender_person_id": selves[0]["person_id"],
        "sender_phone_number": selves[0]["phone_number"],
        "recipient_person_id": recipients[0]["person_id"] if recipients else None,
        "recipient_phone_number": phone_number,
        "content": content,
        "creation_timestamp": world.now,
    }])
    return message_id


def search_messages(
    world: World, kb: KnowledgeBase, message_id: Any = NOT_GIVEN, sender_person_id: Any = NOT_GIVEN,
    sender_phone_number: Any = NOT_GIVEN, recipient_person_id: Any = NOT_GIVEN, recipient_phone_number: Any = NOT_GIVEN,
    content: Any = NOT_GIVEN, creation_timestamp_lowerbound: Any = NOT_GIVEN, creation_timestamp_upperbound: Any = NOT_GIVEN,
) -> list[dict[str, Any]]:
    _phone(sender_phone_number)
    _phone(recipient_phone_number)
    _timestamp(creation_timestamp_lowerbound, "creation_timestamp_lowerbound")
    _timestamp(creation_timestamp_upperbound, "creation_timestamp_upperbound")
    return _filter(world.rows("MESSAGING"), [
        ("message_id", message_id, _exact),
        ("sender_person_id", sender_person_id, _exact),
        ("sender_phone_number", sender_phone_number, _exact),
        ("recipient_person_id", recipient_person_id, _exact),
        ("recipient_phone_number", recipient_phone_number, _exact),
        ("content", content, _fz(50)),
        ("creation_timestamp", creation_timestamp_lowerbound, _ge),
        ("creation_timestamp", creation_timestamp_upperbound, _le),
    ])


# ---------------------------------------------------------------------------- reminders
def add_reminder(
    world: World, kb: KnowledgeBase, content: str, reminder_timestamp: float, latitude: Any = None, longitude: Any = None
) -> str:
    _timestamp(reminder_timestamp, "reminder_timestamp")
    _latitude(latitude, "latitude")
    _longitude(longitude, "longitude")
    reminder_id = world.new_id()
    world.add("REMINDER", [{
        "reminder_id": reminder_id, "content": content, "creation_timestamp": world.now,
        "reminder_timestamp": reminder_timestamp, "latitude": latitude, "longitude": longitude,
    }])
    return reminder_id


def modify_reminder(
    world: World, kb: KnowledgeBase, reminder_id: str, content: Any = NOT_GIVEN, reminder_timestamp: Any = NOT_GIVEN,
    latitude: Any = NOT_GIVEN, longitude: Any = NOT_GIVEN,
) -> None:
    _timestamp(reminder_timestamp, "reminder_timestamp")
    _latitude(latitude, "latitude")
    _longitude(longitude, "longitude")
    if all(x is NOT_GIVEN for x in (content, reminder_timestamp, latitude, longitude)):
        raise ValueError(
            "No update information given. At least one new field should be provided among "
            "[content, reminder_timestamp, latitude, longitude] in order to modify reminder"
        )
    matches = [r for r in world.rows("REMINDER") if r["reminder_id"] == reminder_id]
    if not matches:
        raise NoDataError(f"No db entry matching {reminder_id=} found")
    if len(matches) > 1:
        raise DuplicateError(f"More than 1 entry with {reminder_id=} found")
    entry = matches[0]
    for key, value in (
        ("content", content), ("creation_timestamp", world.now), ("reminder_timestamp", reminder_timestamp),
        ("latitude", latitude), ("longitude", longitude),
    ):
        if value is not NOT_GIVEN:
            entry[key] = value
    world.remove("REMINDER", "reminder_id", reminder_id)
    world.add("REMINDER", [entry])


def search_reminder(
    world: World, kb: KnowledgeBase, reminder_id: Any = NOT_GIVEN, content: Any = NOT_GIVEN,
    creation_timestamp_lowerbound: Any = NOT_GIVEN, creation_timestamp_upperbound: Any = NOT_GIVEN,
    reminder_timestamp_lowerbound: Any = NOT_GIVEN, reminder_timestamp_upperbound: Any = NOT_GIVEN,
    latitude: Any = NOT_GIVEN, longitude: Any = NOT_GIVEN,
) -> list[dict[str, Any]]:
    for value, name in (
        (creation_timestamp_lowerbound, "creation_timestamp_lowerbound"),
        (creation_timestamp_upperbound, "creation_timestamp_upperbound"),
        (reminder_timestamp_lowerbound, "reminder_timestamp_lowerbound"),
        (reminder_timestamp_upperbound, "reminder_timestamp_upperbound"),
    ):
        _timestamp(value, name)
    _latitude(latitude, "latitude")
    _longitude(longitude, "longitude")
    return _filter(world.rows("REMINDER"), [
        ("reminder_id", reminder_id, _exact),
        ("content", content, _fz(50)),
        ("creation_timestamp", creation_timestamp_lowerbound, _ge),
        ("creation_timestamp", creation_timestamp_upperbound, _le),
        ("reminder_timestamp", reminder_timestamp_lowerbound, _ge),
        ("reminder_timestamp", reminder_timestamp_upperbound, _le),
        ("latitude", latitude, _exact),
        ("longitude", longitude, _exact),
    ])


def remove_reminder(world: World, kb: KnowledgeBase, reminder_id: str) -> None:
    world.remove("REMINDER", "reminder_id", reminder_id)


# ---------------------------------------------------------------------------- utilities (UTC)
def _local(ts: float) -> _dt.datetime:
    return _dt.datetime.fromtimestamp(ts, _UTC)


def get_current_timestamp(world: World, kb: KnowledgeBase) -> float:
    return world.now


def timestamp_to_datetime_info(world: World, kb: KnowledgeBase, timestamp: float) -> dict[str, int]:
    _timestamp(timestamp, "timestamp")
    d = _local(timestamp)
    return {
        "year": d.year, "month": d.month, "day": d.day, "hour": d.hour, "minute": d.minute, "second": d.second,
        "isoweekday": d.isoweekday(),
    }


def datetime_info_to_timestamp(
    world: World, kb: KnowledgeBase, year: int, month: int, day: int, hour: int, minute: int, second: int
) -> float:
    return _dt.datetime(year=year, month=month, day=day, hour=hour, minute=minute, second=second, tzinfo=_UTC).timestamp()


def shift_timestamp(
    world: World, kb: KnowledgeBase, timestamp: float, weeks: int = 0, days: int = 0, hours: int = 0,
    minutes: int = 0, seconds: int = 0,
) -> float:
    _timestamp(timestamp, "timestamp")
    shifted = _local(timestamp) + _dt.timedelta(weeks=weeks, days=days, hours=hours, minutes=minutes, seconds=seconds)
    return shifted.timestamp()


def timestamp_diff(world: World, kb: KnowledgeBase, timestamp_0: float, timestamp_1: float) -> dict[str, int]:
    _timestamp(timestamp_0, "timestamp_0")
    _timestamp(timestamp_1, "timestamp_1")
    delta = _local(timestamp_1) - _local(timestamp_0)
    return {"days": delta.days, "seconds": delta.seconds}


def seconds_to_hours_minutes_seconds(world: World, kb: KnowledgeBase, seconds: float) -> dict[str, int]:
    d = _local(seconds)
    return {"hour": d.hour, "minute": d.minute, "second": d.second}


def unit_conversion(world: World, kb: KnowledgeBase, amount: float, from_unit: str, to_unit: str) -> float:
    import pint

    try:
        return pint.Quantity(amount, from_unit).to(to_unit).magnitude
    except pint.UndefinedUnitError:
        return pint.Quantity(amount, from_unit.lower()).to(to_unit.lower()).magnitude


def calculate_lat_lon_distance(
    world: World, kb: KnowledgeBase, latitude_0: float, longitude_0: float, latitude_1: float, longitude_1: float
) -> float:
    _latitude(latitude_0, "latitude_0")
    _latitude(latitude_1, "latitude_1")
    _longitude(longitude_0, "longitude_0")
    _longitude(longitude_1, "longitude_1")
    import geopy.distance

    return geopy.distance.distance((latitude_0, longitude_0), (latitude_1, longitude_1)).kilometers


@lru_cache(maxsize=16)
def _us_holidays(year: int) -> tuple[tuple[_dt.date, str], ...]:
    import holidays

    return tuple(holidays.country_holidays(country="US", years=year).items())


def search_holiday(world: World, kb: KnowledgeBase, holiday_name: str, year: int | None = None) -> float | None:
    if not _get_bool(world, "wifi"):
        raise ConnectionError("Wifi is not enabled")
    if year is None:
        year = _local(world.now).year
    matches = sorted(
        ((fuzz.partial_ratio(holiday_name, name, processor=fuzz_utils.default_process), date, name)
         for date, name in _us_holidays(year)),
        reverse=True,
    )
    if matches and matches[0][0] > 90:
        return _dt.datetime.combine(matches[0][1], _dt.time(), tzinfo=_UTC).timestamp()
    return None


# ---------------------------------------------------------------------------- RapidAPI (offline)
# ISO 4217 codes (active), used to reject unknown currency codes as upstream does.
_ISO4217 = frozenset("""
AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB BRL BSD BTN BWP BYN BZD CAD CDF CHF
CLP CNY COP CRC CUP CVE CZK DJF DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP GEL GHS GIP GMD GNF GTQ GYD HKD HNL HTG
HUF IDR ILS INR IQD IRR ISK JMD JOD JPY KES KGS KHR KMF KPW KRW KWD KYD KZT LAK LBP LKR LRD LSL LYD MAD MDL MGA
MKD MMK MNT MOP MRU MUR MVR MWK MXN MYR MZN NAD NGN NIO NOK NPR NZD OMR PAB PEN PGK PHP PKR PLN PYG QAR RON RSD
RUB RWF SAR SBD SCR SDG SEK SGD SHP SLE SLL SOS SRD SSP STN SVC SYP SZL THB TJS TMT TND TOP TRY TTD TWD TZS UAH
UGX USD UYU UZS VES VND VUV WST XAF XCD XOF XPF YER ZAR ZMW ZWL
""".split())

_TIMEZONES = {"California": "America/Los_Angeles", "Arizona": "America/Phoenix"}


_MISSING: Any = object()


def _canned_key(tool: str, arguments: dict[str, Any]) -> str:
    return json.dumps([tool, arguments], sort_keys=True)


@dataclass
class KnowledgeBase:
    """The offline model of the RapidAPI services (``tools.json`` → ``rapidapi.knowledge_base``).

    ``canned`` holds the recorded answers (``canned_responses_by_scenario``), keyed by tool
    and bound arguments; they take precedence over the model, which answers every other call.
    """

    data: dict[str, Any]
    canned: dict[str, Any] = field(default_factory=dict)

    def recorded(self, tool: str, arguments: dict[str, Any]) -> Any:
        """The recorded answer to this exact call, or ``_MISSING``."""
        value = self.canned.get(_canned_key(tool, arguments), _MISSING)
        return value if value is _MISSING else json.loads(json.dumps(value))

    @property
    def places(self) -> dict[str, dict[str, Any]]:
        return self.data["places"]

    def reverse_geocode(self, lat: float, lon: float) -> str | None:
        tol = self.data["reverse_geocode_tolerance_deg"]
        for place in self.places.values():
            if abs(place["latitude"] - lat) <= tol and abs(place["longitude"] - lon) <= tol:
                return place["reverse_geocode_address"]
        return None

    def search_places(self, query: str) -> list[dict[str, Any]]:
        q = query.lower()
        for rule in self.data["location_query_rules"]:
            if all(k in q for k in rule["all_keywords"]):
                out = []
                for key in rule["places"]:
                    p = self.places[key]
                    item = {k: p[k] for k in ("name", "full_address", "type", "latitude", "longitude")}
                    for extra in ("phone_number", "website"):
                        if p.get(extra) is not None:
                            item[extra] = p[extra]
                    out.append(item)
                return out
        return []

    def weather(self, lat: float, lon: float, days: int) -> dict[str, Any] | None:
        tol = self.data["weather_tolerance_deg"]
        best = None
        for key, station in self.data["weather"].items():
            p = self.places[key]
            d = max(abs(p["latitude"] - lat), abs(p["longitude"] - lon))
            if d <= tol and (best is None or d < best[0]):
                best = (d, p, station)
        if best is None:
            return None
        _, p, station = best
        if days >= len(station["forecast"]):
            return None
        day = station["forecast"][days]
        out: dict[str, Any] = {
            "condition": {"text": day["condition"]},
            "daily_chance_of_rain": 0,
            "sunrise": "05:47 AM",
            "sunset": "08:24 PM",
            "name": p["city"],
            "region": p["region"],
            "country": "United States of America",
            "lat": round(p["latitude"], 2),
            "lon": round(p["longitude"], 2),
            "tz_id": _TIMEZONES.get(p["region"], "America/Los_Angeles"),
            "temperature_unit": "Celsius",
            "distance_unit": "Kilometer",
        }
        if days == 0:
            cur = station["current"]
            out["condition"] = {"text": cur["condition"]}
            out["humidity"] = cur["humidity"]
            out["current_temperature"] = cur["temp_c"]
            out["perceived_temperature"] = cur["feelslike_c"]
            out["visibility_distance"] = cur["vis_km"]
            out["wind_speed"] = cur["wind_kph"]
        out["max_temperature"] = day["maxtemp_c"]
        out["min_temperature"] = day["mintemp_c"]
        out["average_temperature"] = day["avgtemp_c"]
        out["max_wind_speed"] = 20.2
        out["average_visibility_distance"] = 10.0
        if days == 0:
            out["barometric_pressure"] = station["current"]["pressure_mb"]
        out["average_humidity"] = 45
        return out

    def stock(self, query: str) -> dict[str, Any] | None:
        q = query.lower()
        for s in self.data["stocks"]:
            if any(k in q for k in s["keywords"]):
                info = dict(s["raw"])
                info["symbol"] = info["symbol"].split(":")[0]
                return info
        return None

    def convert(self, amount: float, src: str, dst: str) -> float:
        rates = self.data["currency_per_usd"]
        src, dst = src.upper(), dst.upper()
        if src not in rates or dst not in rates:
            raise RuntimeError("Conversion failed")
        return float(amount / rates[src] * rates[dst])


def load_knowledge_base(tools_json: dict[str, Any]) -> KnowledgeBase:
    rapid = tools_json["rapidapi"]
    canned = {
        _canned_key(c["tool_name"], c["arguments"]): c["result"]
        for calls in (rapid.get("canned_responses_by_scenario") or {}).values()
        for c in calls
    }
    return KnowledgeBase(rapid["knowledge_base"], canned)


def _current_lat_lon(world: World, latitude: Any, longitude: Any) -> tuple[float, float]:
    _latitude(latitude, "latitude")
    _longitude(longitude, "longitude")
    if (latitude is None) ^ (longitude is None):
        raise ValueError("Latitude and Longitude must be either both provided, or both not provided")
    if latitude is None and longitude is None:
        if not _get_bool(world, "location_service"):
            raise PermissionError("Location service is not enabled.")
        loc = get_current_location(world, None)  # type: ignore[arg-type]
        latitude, longitude = loc["latitude"], loc["longitude"]
    return latitude, longitude


def _web(world: World) -> None:
    if not _get_bool(world, "wifi"):
        raise ConnectionError("Wifi is not enabled")


def search_lat_lon(world: World, kb: KnowledgeBase, latitude: float, longitude: float) -> str | None:
    _latitude(latitude, "latitude")
    _longitude(longitude, "longitude")
    _web(world)
    hit = kb.recorded("search_lat_lon", {"latitude": latitude, "longitude": longitude})
    return kb.reverse_geocode(latitude, longitude) if hit is _MISSING else hit


def search_location_around_lat_lon(
    world: World, kb: KnowledgeBase, location: str, latitude: Any = None, longitude: Any = None
) -> list[dict[str, Any]]:
    asked = {"location": location, "latitude": latitude, "longitude": longitude}
    latitude, longitude = _current_lat_lon(world, latitude, longitude)
    _web(world)
    hit = kb.recorded("search_location_around_lat_lon", asked)
    return kb.search_places(location) if hit is _MISSING else hit


def search_weather_around_lat_lon(
    world: World, kb: KnowledgeBase, days: int = 0, latitude: Any = None, longitude: Any = None
) -> dict[str, Any] | None:
    asked = {"days": days, "latitude": latitude, "longitude": longitude}
    latitude, longitude = _current_lat_lon(world, latitude, longitude)
    if days < 0 or not isinstance(days, int):
        raise ValueError(f"Days must be positive integer, found {days=}.")
    _web(world)
    hit = kb.recorded("search_weather_around_lat_lon", asked)
    return kb.weather(latitude, longitude, days) if hit is _MISSING else hit


def search_stock(world: World, kb: KnowledgeBase, query: str) -> dict[str, Any] | None:
    _web(world)
    hit = kb.recorded("search_stock", {"query": query})
    return kb.stock(query) if hit is _MISSING else hit


def convert_currency(world: World, kb: KnowledgeBase, amount: float, from_currency_code: str, to_currency_code: str) -> float:
    for code in (from_currency_code, to_currency_code):
        if code.upper() not in _ISO4217:
            raise ValueError(f"{code} is not a known 3 letter ISO 4217 currency code")
    _web(world)
    hit = kb.recorded("convert_currency", {"amount": amount, "from_currency_code": from_currency_code,
                                           "to_currency_code": to_currency_code})
    return kb.convert(amount, from_currency_code, to_currency_code) if hit is _MISSING else hit


def end_conversation(world: World, kb: KnowledgeBase) -> None:
    """The user's tool; the engine handles the conversation flag itself."""
    return None


TOOL_FUNCTIONS: dict[str, Callable[..., Any]] = {
    f.__name__: f
    for f in (
        add_contact, modify_contact, remove_contact, search_contacts, get_cellular_service_status, search_messages,
        send_message_with_phone_number, convert_currency, get_current_location, get_location_service_status,
        get_wifi_status, search_lat_lon, search_location_around_lat_lon, search_stock, search_weather_around_lat_lon,
        add_reminder, modify_reminder, remove_reminder, search_reminder, get_low_battery_mode_status,
        set_cellular_service_status, set_location_service_status, set_low_battery_mode_status, set_wifi_status,
        end_conversation, calculate_lat_lon_distance, datetime_info_to_timestamp, get_current_timestamp,
        search_holiday, seconds_to_hours_minutes_seconds, shift_timestamp, timestamp_diff,
        timestamp_to_datetime_info, unit_conversion,
    )
}
