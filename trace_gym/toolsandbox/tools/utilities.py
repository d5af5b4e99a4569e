"""The utility tools: clock and calendar arithmetic (UTC), units, distances and US holidays.

Each is ``fn(world, kb, **arguments)`` and behaves like upstream's tool of the same name;
"now" is the world's frozen clock and local time is UTC.  ``pint`` and ``geopy`` are
imported on first use only.
"""

from __future__ import annotations

import datetime as _dt
from typing import TYPE_CHECKING

from ..world import World
from .common import latitude_range, longitude_range, require_wifi, timestamp_range
from .holidays import find_holiday

if TYPE_CHECKING:
    from .rapidapi import KnowledgeBase

_UTC = _dt.UTC


def _local(ts: float) -> _dt.datetime:
    return _dt.datetime.fromtimestamp(ts, _UTC)


def get_current_timestamp(world: World, kb: KnowledgeBase) -> float:
    return world.now


def timestamp_to_datetime_info(world: World, kb: KnowledgeBase, timestamp: float) -> dict[str, int]:
    timestamp_range(timestamp, "timestamp")
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
    timestamp_range(timestamp, "timestamp")
    shifted = _local(timestamp) + _dt.timedelta(weeks=weeks, days=days, hours=hours, minutes=minutes, seconds=seconds)
    return shifted.timestamp()


def timestamp_diff(world: World, kb: KnowledgeBase, timestamp_0: float, timestamp_1: float) -> dict[str, int]:
    timestamp_range(timestamp_0, "timestamp_0")
    timestamp_range(timestamp_1, "timestamp_1")
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
    latitude_range(latitude_0, "latitude_0")
    latitude_range(latitude_1, "latitude_1")
    longitude_range(longitude_0, "longitude_0")
    longitude_range(longitude_1, "longitude_1")
    import geopy.distance

    return geopy.distance.distance((latitude_0, longitude_0), (latitude_1, longitude_1)).kilometers


def search_holiday(world: World, kb: KnowledgeBase, holiday_name: str, year: int | None = None) -> float | None:
    require_wifi(world)
    if year is None:
        year = _local(world.now).year
    found = find_holiday(holiday_name, year)
    return None if found is None else _dt.datetime.combine(found, _dt.time(), tzinfo=_UTC).timestamp()


def end_conversation(world: World, kb: KnowledgeBase) -> None:
    """The user's tool; the engine handles the conversation flag itself."""
    return None
