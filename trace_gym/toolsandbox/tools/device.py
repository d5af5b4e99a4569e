"""The device's own tools: settings, location, contacts, messaging and reminders.

Each is ``fn(world, kb, **arguments)`` over an injected
:class:`~trace_gym.toolsandbox.world.World` and behaves like upstream's tool of the
same name (same preconditions, fuzzy matching, exceptions and row layout).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..world import World
from .common import (
    NOT_GIVEN,
    DuplicateError,
    NoDataError,
    check_phone,
    check_type,
    current_location,
    exact,
    filter_rows,
    fuzzy,
    ge,
    get_bool,
    latitude_range,
    le,
    longitude_range,
    timestamp_range,
)

if TYPE_CHECKING:
    from .rapidapi import KnowledgeBase


# ---------------------------------------------------------------------------- settings
def _set_bool(world: World, name: str, on: Any) -> None:
    check_type(on, "on", "bool", frozenset({bool}))
    if bool(world.setting(name)) == on:
        raise ValueError(f"{name} already {('disabled', 'enabled')[int(on)]}")
    world.set_setting(name, not world.setting(name))


def set_low_battery_mode_status(world: World, kb: KnowledgeBase, on: Any) -> None:
    check_type(on, "on", "bool", frozenset({bool}))
    _set_bool(world, "low_battery_mode", on)
    if on:
        for dependent in ("cellular", "wifi", "location_service"):
            try:
                _set_bool(world, dependent, False)
            except ValueError:
                pass


def get_low_battery_mode_status(world: World, kb: KnowledgeBase) -> bool:
    return get_bool(world, "low_battery_mode")


def set_location_service_status(world: World, kb: KnowledgeBase, on: Any) -> None:
    if on and get_bool(world, "low_battery_mode"):
        raise PermissionError("Location service cannot be turned on in low battery mode")
    _set_bool(world, "location_service", on)


def get_location_service_status(world: World, kb: KnowledgeBase) -> bool:
    return get_bool(world, "location_service")


def _set_radio(world: World, setting: str, label: str, on: Any) -> None:
    check_type(on, "on", "bool", frozenset({bool}))
    if on and get_bool(world, "low_battery_mode"):
        raise PermissionError(f"{label} cannot be turned on in low battery mode")
    _set_bool(world, setting, on)


def set_cellular_service_status(world: World, kb: KnowledgeBase, on: Any) -> None:
    _set_radio(world, "cellular", "Cellular service", on)


def get_cellular_service_status(world: World, kb: KnowledgeBase) -> bool:
    return get_bool(world, "cellular")


def set_wifi_status(world: World, kb: KnowledgeBase, on: Any) -> None:
    _set_radio(world, "wifi", "Wifi", on)


def get_wifi_status(world: World, kb: KnowledgeBase) -> bool:
    return get_bool(world, "wifi")


def get_current_location(world: World, kb: KnowledgeBase) -> dict[str, float]:
    return current_location(world)


# ---------------------------------------------------------------------------- contacts
def _replace_row(world: World, db: str, key: str, ident: Any, updates: dict[str, Any]) -> None:
    """Upstream's modify: the one row whose ``key`` is ``ident``, updated, removed and appended again."""
    matches = [r for r in world.rows(db) if r[key] == ident]
    if not matches:
        raise NoDataError(f"No db entry matching {key}={ident!r} found")
    if len(matches) > 1:
        raise DuplicateError(f"More than 1 entry with {key}={ident!r} found")
    entry = matches[0]
    entry.update({k: v for k, v in updates.items() if v is not NOT_GIVEN})
    world.remove(db, key, ident)
    world.add(db, [entry])


def search_contacts(
    world: World, kb: KnowledgeBase, person_id: Any = NOT_GIVEN, name: Any = NOT_GIVEN, phone_number: Any = NOT_GIVEN,
    relationship: Any = NOT_GIVEN, is_self: Any = NOT_GIVEN,
) -> list[dict[str, Any]]:
    check_phone(phone_number)
    return filter_rows(world.rows("CONTACT"), [
        ("person_id", person_id, exact),
        ("name", name, fuzzy(90)),
        ("phone_number", phone_number, exact),
        ("relationship", relationship, fuzzy(90)),
        ("is_self", is_self, exact),
    ])


def add_contact(
    world: World, kb: KnowledgeBase, name: str, phone_number: str, relationship: str | None = None, is_self: bool = False
) -> str:
    check_phone(phone_number)
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
    check_phone(phone_number)
    selves = search_contacts(world, kb, is_self=True)
    if selves and is_self and selves[0]["person_id"] != person_id:
        raise DuplicateError("Self entry already exists. Cannot add another one.")
    _replace_row(world, "CONTACT", "person_id", person_id,
                 {"name": name, "phone_number": phone_number, "relationship": relationship, "is_self": is_self})


def remove_contact(world: World, kb: KnowledgeBase, person_id: str) -> None:
    world.remove("CONTACT", "person_id", person_id)


# ---------------------------------------------------------------------------- messaging
def send_message_with_phone_number(world: World, kb: KnowledgeBase, phone_number: str, content: str) -> str:
    check_phone(phone_number)
    if not get_bool(world, "cellular"):
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
    check_phone(sender_phone_number)
    check_phone(recipient_phone_number)
    timestamp_range(creation_timestamp_lowerbound, "creation_timestamp_lowerbound")
    timestamp_range(creation_timestamp_upperbound, "creation_timestamp_upperbound")
    return filter_rows(world.rows("MESSAGING"), [
        ("message_id", message_id, exact),
        ("sender_person_id", sender_person_id, exact),
        ("sender_phone_number", sender_phone_number, exact),
        ("recipient_person_id", recipient_person_id, exact),
        ("recipient_phone_number", recipient_phone_number, exact),
        ("content", content, fuzzy(50)),
        ("creation_timestamp", creation_timestamp_lowerbound, ge),
        ("creation_timestamp", creation_timestamp_upperbound, le),
    ])


# ---------------------------------------------------------------------------- reminders
def add_reminder(
    world: World, kb: KnowledgeBase, content: str, reminder_timestamp: float, latitude: Any = None, longitude: Any = None
) -> str:
    timestamp_range(reminder_timestamp, "reminder_timestamp")
    latitude_range(latitude, "latitude")
    longitude_range(longitude, "longitude")
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
    timestamp_range(reminder_timestamp, "reminder_timestamp")
    latitude_range(latitude, "latitude")
    longitude_range(longitude, "longitude")
    if all(x is NOT_GIVEN for x in (content, reminder_timestamp, latitude, longitude)):
        raise ValueError(
            "No update information given. At least one new field should be provided among "
            "[content, reminder_timestamp, latitude, longitude] in order to modify reminder"
        )
    _replace_row(world, "REMINDER", "reminder_id", reminder_id, {
        "content": content, "creation_timestamp": world.now, "reminder_timestamp": reminder_timestamp,
        "latitude": latitude, "longitude": longitude,
    })


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
        timestamp_range(value, name)
    latitude_range(latitude, "latitude")
    longitude_range(longitude, "longitude")
    return filter_rows(world.rows("REMINDER"), [
        ("reminder_id", reminder_id, exact),
        ("content", content, fuzzy(50)),
        ("creation_timestamp", creation_timestamp_lowerbound, ge),
        ("creation_timestamp", creation_timestamp_upperbound, le),
        ("reminder_timestamp", reminder_timestamp_lowerbound, ge),
        ("reminder_timestamp", reminder_timestamp_upperbound, le),
        ("latitude", latitude, exact),
        ("longitude", longitude, exact),
    ])


def remove_reminder(world: World, kb: KnowledgeBase, reminder_id: str) -> None:
    world.remove("REMINDER", "reminder_id", reminder_id)
