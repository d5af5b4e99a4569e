"""US federal holidays by year, and upstream's fuzzy lookup of a holiday by name.

Upstream's ``search_holiday`` asks the ``holidays`` package (version 0.51) for the US
holidays of a year and takes the best rapidfuzz ``partial_ratio`` match of the asked name
(``default_process``: lower case, punctuation stripped) if it scores above 90.  The
names and dates matter: ``partial_ratio`` aligns the shorter string inside the longer
one, so "Thanksgiving dinner" finds ``Thanksgiving`` (0.51's name) but not
``Thanksgiving Day`` (the name newer releases use).  So the table is computed here, by
the federal rules as that release states them, instead of asking whatever ``holidays``
release is installed -- which also keeps the first call cheap (no package import).

Rules (first year in force): New Year's Day, Independence Day, Thanksgiving (fourth
Thursday of November) and Christmas Day since 1871; Washington's Birthday since 1879
(February 22, the third Monday of February from 1971); Memorial Day since 1888 (May 30,
the last Monday of May from 1971); Labor Day (first Monday of September) since 1894;
Columbus Day since 1937 (October 12, the second Monday of October from 1971); Armistice
Day since 1938, named Veterans Day from 1954 (November 11, the fourth Monday of October
in 1971-1977); Martin Luther King Jr. Day (third Monday of January) since 1986; Juneteenth
National Independence Day (June 19) since 2021.  A fixed-date holiday on a Saturday is
also observed the Friday before, on a Sunday the Monday after, named ``"<name> (observed)"``
(New Year's Day of the next year may be observed on December 31; Memorial Day, Washington's
Birthday and Columbus Day on their fixed dates are not).
"""

from __future__ import annotations

import datetime as _dt
from functools import lru_cache

__all__ = ["us_holidays", "find_holiday", "MATCH_THRESHOLD"]

MATCH_THRESHOLD = 90  # a match must score above this
_MON, _THU, _SAT, _SUN = 0, 3, 5, 6


def _nth_weekday(year: int, month: int, weekday: int, n: int) -> _dt.date:
    """The ``n``-th ``weekday`` of the month (``n = -1``: the last one)."""
    if n > 0:
        first = _dt.date(year, month, 1)
        return first + _dt.timedelta(days=(weekday - first.weekday()) % 7 + 7 * (n - 1))
    nxt = _dt.date(year + month // 12, month % 12 + 1, 1)
    last = nxt - _dt.timedelta(days=1)
    return last - _dt.timedelta(days=(last.weekday() - weekday) % 7)


def _observed(day: _dt.date) -> _dt.date | None:
    if day.weekday() == _SAT:
        return day - _dt.timedelta(days=1)
    if day.weekday() == _SUN:
        return day + _dt.timedelta(days=1)
    return None


@lru_cache(maxsize=64)
def us_holidays(year: int) -> tuple[tuple[_dt.date, str], ...]:
    """``(date, name)`` of the US federal holidays of ``year`` (observed days included), by date."""
    out: dict[_dt.date, str] = {}

    def add(day: _dt.date, name: str, observe: bool = False) -> None:
        if day.year == year:
            out[day] = name
        moved = _observed(day) if observe else None
        if moved is not None and moved.year == year:
            out[moved] = f"{name} (observed)"

    if year < 1871:
        return ()
    add(_dt.date(year, 1, 1), "New Year's Day", observe=True)
    add(_dt.date(year + 1, 1, 1), "New Year's Day", observe=True)
    if year >= 1888:
        add(_nth_weekday(year, 5, _MON, -1) if year >= 1971 else _dt.date(year, 5, 30), "Memorial Day")
    if year >= 2021:
        add(_dt.date(year, 6, 19), "Juneteenth National Independence Day", observe=True)
    add(_dt.date(year, 7, 4), "Independence Day", observe=True)
    if year >= 1894:
        add(_nth_weekday(year, 9, _MON, 1), "Labor Day")
    if year >= 1938:
        name = "Veterans Day" if year >= 1954 else "Armistice Day"
        if 1971 <= year <= 1977:
            add(_nth_weekday(year, 10, _MON, 4), name)
        else:
            add(_dt.date(year, 11, 11), name, observe=True)
    add(_nth_weekday(year, 11, _THU, 4), "Thanksgiving")
    add(_dt.date(year, 12, 25), "Christmas Day", observe=True)
    if year >= 1986:
        add(_nth_weekday(year, 1, _MON, 3), "Martin Luther King Jr. Day")
    if year >= 1879:
        add(_nth_weekday(year, 2, _MON, 3) if year >= 1971 else _dt.date(year, 2, 22), "Washington's Birthday")
    if year >= 1937:
        add(_nth_weekday(year, 10, _MON, 2) if year >= 1971 else _dt.date(year, 10, 12), "Columbus Day")
    return tuple(sorted(out.items()))


def find_holiday(holiday_name: str, year: int) -> _dt.date | None:
    """The date of the holiday of ``year`` whose name best matches ``holiday_name``, as upstream finds it.

    Candidates are ranked by ``(partial_ratio, date, name)``, highest first; the best one
    counts only if it scores above :data:`MATCH_THRESHOLD`.
    """
    from rapidfuzz import fuzz
    from rapidfuzz import utils as fuzz_utils

    ranked = sorted(
        ((fuzz.partial_ratio(holiday_name, name, processor=fuzz_utils.default_process), day, name)
         for day, name in us_holidays(year)),
        reverse=True,
    )
    if ranked and ranked[0][0] > MATCH_THRESHOLD:
        return ranked[0][1]
    return None
