"""A seeded synthetic ToolSandbox world, drawn from difficulty knobs (never from the benchmark's scenarios).

The world tables use ToolSandbox's columns (:data:`trace_gym.toolsandbox.world.COLUMNS`):

* ``settings`` — ``{"device": row}``: cellular, wifi, location service and low-battery mode
  (each switched off with the given percent chance; low-battery mode switches the radios
  and location off, as on the device), plus the current latitude and longitude;
* ``contacts`` — the device owner (``is_self``) first, then ``contacts`` others (names from
  the shared pools; ``similar_names`` more share a first name with one of them);
* ``messages`` — one message from every other contact to the owner, plus ``messages`` more
  either way, all before now; ``reminders`` — ``reminders`` upcoming reminders.

Scenario material that is not part of the world (slots draw from it like from a table):

* ``clock`` — ``{"now": {...}}``: the frozen current time (timestamp, ISO text, date parts);
* ``times`` — moments as a person says them (``kind``: ``later_today``, ``tomorrow``,
  ``calendar``) with the ``phrase`` and the canonical ``timestamp`` (UTC, like the tools);
* ``notes`` — short texts (``kind``: ``message`` or ``reminder``);
* ``numbers`` — phone numbers that are in no contact, as ``e164`` and as a person writes
  them (``display``, e.g. ``(415) 555-0134``);
* ``holidays`` — the next occurrence of each US federal holiday (``search_holiday``'s calendar):
  ``name`` (as a person says it), ``year``, the midnight ``timestamp`` the tool returns for that
  name and ``days`` from now to it as ``timestamp_diff`` counts them.  Computed from the clock alone (no draws), so adding it left
  every other table of a seed unchanged.

:data:`SIZES` gives each keyword's range; the spec loader rejects a size (or a knob that
sets it) outside it.
"""

from __future__ import annotations

import datetime as _dt
import random
from typing import Any

from ._draw import sample
from ._names import FIRST_NAMES, LAST_NAMES, pick_names

__all__ = ["generate_toolsandbox_world", "SIZES", "WORLD_TABLES", "MATERIAL_FIELDS", "RELATIONSHIPS", "KINDS"]

SIZES: dict[str, tuple[int, int]] = {
    "contacts": (2, 40), "messages": (0, 80), "reminders": (0, 40), "similar_names": (0, 10),
    "cellular_off": (0, 100), "wifi_off": (0, 100), "location_off": (0, 100), "low_battery": (0, 100),
}
WORLD_TABLES = {"settings": "SETTING", "contacts": "CONTACT", "messages": "MESSAGING", "reminders": "REMINDER"}
MATERIAL_FIELDS: dict[str, tuple[str, ...]] = {
    "clock": ("timestamp", "iso", "year", "month", "day", "hour", "minute", "weekday", "date"),
    "times": ("id", "kind", "phrase", "year", "month", "day", "hour", "minute", "second", "timestamp"),
    "notes": ("id", "kind", "text"),
    "numbers": ("e164", "display"),
    "holidays": ("id", "name", "year", "timestamp", "days"),
}
RELATIONSHIPS = ("friend", "family", "coworker", "boss", "neighbor", "classmate")
# fields with a fixed set of values (a spec's literal ``where`` on them must name one)
KINDS: dict[tuple[str, str], tuple[Any, ...]] = {
    ("contacts", "relationship"): ("self",) + RELATIONSHIPS,
    ("contacts", "is_self"): (True, False),
    ("times", "kind"): ("later_today", "tomorrow", "calendar"),
    ("notes", "kind"): ("message", "reminder"),
    ("settings", "cellular"): (True, False), ("settings", "wifi"): (True, False),
    ("settings", "location_service"): (True, False), ("settings", "low_battery_mode"): (True, False),
}

_MESSAGES = [
    "Running ten minutes late", "Can you pick up some bread on the way home", "The meeting moved to Thursday",
    "Happy birthday, have a great day", "Dinner is ready at seven", "I left the keys under the mat",
    "Call me when you land", "The package arrived this morning", "See you at the gym tonight",
    "Thanks for the help yesterday", "Don't forget the tickets", "The train is delayed by twenty minutes",
]
_REMINDERS = [
    "buy milk", "call the dentist", "water the plants", "pay the electricity bill", "take out the recycling",
    "book a table for Friday", "renew the library books", "pick up the dry cleaning", "send the report to Sam",
    "charge the camera battery", "check the tire pressure", "order more coffee beans",
]
_PLACES = [(39.7392, -104.9903), (30.2672, -97.7431), (47.6062, -122.3321), (41.8781, -87.6298), (42.3601, -71.0589),
           (33.4484, -112.074), (40.7128, -74.006), (39.9612, -82.9988)]
_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December"]
# a holiday's name as a person says it, where the calendar's name would find another holiday
_SPOKEN = {"Juneteenth National Independence Day": "Juneteenth"}
_WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


# uuid.UUID(int=n, version=4): the variant bits set to RFC 4122, the version bits to 4
_UUID_KEEP = ~((0xC000 << 48) | (0xF000 << 64))
_UUID_SET = (0x8000 << 48) | (4 << 76)


def _uuid(rng: random.Random) -> str:
    """``str(uuid.UUID(int=rng.getrandbits(128), version=4))``, without building the object."""
    h = "%032x" % ((rng.getrandbits(128) & _UUID_KEEP) | _UUID_SET)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _phone(rng: random.Random, used: set[str]) -> tuple[str, str]:
    below = rng._randbelow  # rng.randrange(a, b) is a + rng._randbelow(b - a): the same draws, less overhead
    while True:
        area, exchange, line = 201 + below(789), 201 + below(789), below(10000)
        e164 = f"+1{area}{exchange}{line:04d}"
        if e164 not in used and area % 100 != 11 and exchange % 100 != 11:
            used.add(e164)
            return e164, f"({area}) {exchange}-{line:04d}"


def _clock12(hour: int, minute: int) -> str:
    h = hour % 12 or 12
    return f"{h} {'AM' if hour < 12 else 'PM'}" if minute == 0 else f"{h}:{minute:02d} {'AM' if hour < 12 else 'PM'}"


def _moment(kind: str, i: int, at: _dt.datetime, phrase: str) -> dict[str, Any]:
    return {"id": f"{kind}_{i}", "kind": kind, "phrase": phrase, "year": at.year, "month": at.month, "day": at.day,
            "hour": at.hour, "minute": at.minute, "second": 0, "timestamp": at.timestamp()}


def _times(rng: random.Random, now: _dt.datetime) -> list[dict[str, Any]]:
    out = []
    below = rng._randbelow  # randrange(a, b) is a + _randbelow(b - a), choice(s) is s[_randbelow(len(s))]
    tomorrow = now + _dt.timedelta(days=1)
    for i in range(3):
        at = now.replace(minute=(0, 30)[below(2)], second=0) + _dt.timedelta(hours=2 + below(4))
        out.append(_moment("later_today", i, at, f"today at {_clock12(at.hour, at.minute)}"))
        at = tomorrow.replace(hour=7 + below(14), minute=(0, 15, 30, 45)[below(4)], second=0)
        out.append(_moment("tomorrow", i, at, f"tomorrow at {_clock12(at.hour, at.minute)}"))
        at = (now + _dt.timedelta(days=3 + below(87))).replace(hour=7 + below(14), minute=(0, 30)[below(2)], second=0)
        year = f", {at.year}" if at.year != now.year else ""
        out.append(_moment("calendar", i, at, f"on {_MONTHS[at.month - 1]} {at.day}{year} at {_clock12(at.hour, at.minute)}"))
    return out


def _holidays(now: _dt.datetime) -> list[dict[str, Any]]:
    """The next occurrence (after ``now``) of each holiday that ``search_holiday`` finds by its spoken name."""
    from ...toolsandbox.tools.holidays import find_holiday, us_holidays

    out: dict[str, dict[str, Any]] = {}
    for year in (now.year, now.year + 1):
        for date, name in us_holidays(year):
            spoken = _SPOKEN.get(name, name)
            day = find_holiday(spoken, year)
            if "(observed)" in name or spoken in out or day != date:  # left out: where the tool answers another day
                continue                                               # (an observed day later in the year wins a tie)
            at = _dt.datetime(day.year, day.month, day.day, tzinfo=_dt.UTC)
            if at > now:
                out[spoken] = {"id": f"holiday_{len(out)}", "name": spoken, "year": year, "timestamp": at.timestamp(),
                               "days": (at - now).days}
    return sorted(out.values(), key=lambda h: h["timestamp"])


def generate_toolsandbox_world(
    rng: random.Random, contacts: int = 6, messages: int = 6, reminders: int = 3, similar_names: int = 0,
    cellular_off: int = 0, wifi_off: int = 0, location_off: int = 0, low_battery: int = 0,
) -> dict[str, Any]:
    """A world and its scenario material (see the module docstring); ``*_off``/``low_battery`` are percent chances."""
    for key, value in locals().items():
        if key in SIZES and not SIZES[key][0] <= value <= SIZES[key][1]:
            raise ValueError(f"{key} must be in {list(SIZES[key])}, got {value}")
    below = rng._randbelow  # randrange(a, b) is a + _randbelow(b - a), choice(s) is s[_randbelow(len(s))]: same draws
    now = _dt.datetime(2025 + below(2), 1 + below(12), 1 + below(27), 8 + below(8), (0, 10, 20, 30, 40, 50)[below(6)],
                       tzinfo=_dt.UTC)
    lat, lon = _PLACES[below(len(_PLACES))]
    lat, lon = round(lat + rng.uniform(-0.05, 0.05), 6), round(lon + rng.uniform(-0.05, 0.05), 6)
    battery = rng.random() * 100 < low_battery
    device = {"device_id": _uuid(rng), "cellular": not (battery or rng.random() * 100 < cellular_off),
              "wifi": not (battery or rng.random() * 100 < wifi_off),
              "location_service": not (battery or rng.random() * 100 < location_off),
              "low_battery_mode": battery, "latitude": lat, "longitude": lon}
    used: set[str] = set()
    names = pick_names(rng, contacts + 1)
    people = []
    for k, (first, last) in enumerate(names):
        phone, _ = _phone(rng, used)
        people.append({"person_id": _uuid(rng), "name": f"{first} {last}", "phone_number": phone,
                       "relationship": "self" if k == 0 else RELATIONSHIPS[below(len(RELATIONSHIPS))], "is_self": k == 0})
    taken = {p["name"] for p in people}
    for _ in range(similar_names):
        first = people[1 + below(contacts)]["name"].split()[0]
        last = next(n for n in sample(rng, LAST_NAMES, len(LAST_NAMES)) + [None] if n is None or f"{first} {n}" not in taken)
        if last is None:
            continue
        taken.add(f"{first} {last}")
        people.append({"person_id": _uuid(rng), "name": f"{first} {last}", "phone_number": _phone(rng, used)[0],
                       "relationship": RELATIONSHIPS[below(len(RELATIONSHIPS))], "is_self": False})
    me, others = people[0], people[1:]
    start = now.timestamp()
    texts = []
    n_msg, n_others, span = len(_MESSAGES), len(others), 30 * 86400 - 600
    for p in others:
        texts.append((p, me, _MESSAGES[below(n_msg)], start - (600 + below(span))))
    for _ in range(messages):
        p = others[below(n_others)]
        pair = (me, p) if rng.random() < 0.5 else (p, me)
        texts.append((*pair, _MESSAGES[below(n_msg)], start - (600 + below(span))))
    texts.sort(key=lambda t: t[3])
    rows = [{"message_id": _uuid(rng), "sender_person_id": s["person_id"], "sender_phone_number": s["phone_number"],
             "recipient_person_id": r["person_id"], "recipient_phone_number": r["phone_number"], "content": text,
             "creation_timestamp": float(ts)} for s, r, text, ts in texts]
    notes = [{"id": f"message_{i}", "kind": "message", "text": t} for i, t in enumerate(sample(rng, _MESSAGES, 4))]
    notes += [{"id": f"reminder_{i}", "kind": "reminder", "text": t} for i, t in enumerate(sample(rng, _REMINDERS, 4))]
    reminder_rows = []
    for content in sample(rng, _REMINDERS, min(reminders, len(_REMINDERS))) + [rng.choice(_REMINDERS)] * max(0, reminders - len(_REMINDERS)):
        reminder_rows.append({"reminder_id": _uuid(rng), "content": content, "creation_timestamp": start - (3600 + below(86400 * 7 - 3600)),
                              "reminder_timestamp": start + (3600 + below(86400 * 14 - 3600)), "latitude": None, "longitude": None})
    numbers = [dict(zip(("e164", "display"), _phone(rng, used), strict=True)) for _ in range(3)]
    clock = {"timestamp": start, "iso": now.strftime("%Y-%m-%dT%H:%M:%S"), "year": now.year, "month": now.month, "day": now.day,
             "hour": now.hour, "minute": now.minute, "weekday": _WEEKDAYS[now.weekday()],
             "date": f"{_WEEKDAYS[now.weekday()]}, {_MONTHS[now.month - 1]} {now.day}, {now.year}"}
    return {"settings": {"device": device}, "contacts": people, "messages": rows, "reminders": reminder_rows,
            "clock": {"now": clock}, "times": _times(rng, now), "notes": notes, "numbers": numbers,
            "holidays": _holidays(now)}


assert len(FIRST_NAMES) * len(LAST_NAMES) > SIZES["contacts"][1] + SIZES["similar_names"][1] + 1
