"""``search_holiday``: the US holiday table and upstream's fuzzy name matching.

The recorded answers (``data/upstream_holidays.json``, made by ``record_upstream_holidays.py``
with upstream's pinned ``holidays`` 0.51 and ``rapidfuzz`` 3.9.3) cover generated names:
real names with extra words, misspelled, re-cased, aliases and random text.  The properties
below generate their own names.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trace_gym.toolsandbox.tools.holidays import find_holiday, us_holidays

RECORDED = json.loads((Path(__file__).parent / "data" / "upstream_holidays.json").read_text(encoding="utf-8"))
YEARS = [1890, 1950, 1960, 1975, 2021, 2024, 2025, 2026, 2100]
NAMES = sorted({n for y in YEARS for _, n in us_holidays(y)})
FILLER = ["the", "holiday", "weekend", "celebration", "party", "federal", "dinner", "big", "off", "morning", "2025"]


def _processed(text: str) -> str:
    """rapidfuzz's ``default_process``: alphanumerics lower-cased, everything else a space, trimmed."""
    return re.sub(r"[^0-9a-z]", " ", text.lower()).strip()


def _answer(name: str, year: int) -> str | None:
    try:
        found = find_holiday(name, year)
    except Exception as exc:  # the tool shows it as an error line, as upstream does
        return f"!{type(exc).__name__}: {exc}"
    return found.isoformat() if found is not None else None


def test_table_is_the_upstream_release_for_every_year() -> None:
    for year, rows in RECORDED["tables"].items():
        assert [[d.isoformat(), n] for d, n in us_holidays(int(year))] == rows, year


def test_generated_lookups_agree_with_upstream() -> None:
    wrong = [(q, y, want, _answer(q, y)) for q, y, want in RECORDED["lookups"] if _answer(q, y) != want]
    assert not wrong, wrong[:5]
    assert sum(1 for *_, a in RECORDED["lookups"] if a is None) > 50  # the set has misses as well as hits


def test_decorated_names_that_newer_releases_miss() -> None:
    # partial_ratio aligns the shorter string: "thanksgiving" sits inside these, "thanksgiving day" does not.
    for query in ("Thanksgiving dinner", "Thanksgiving holiday", "big Thanksgiving party"):
        assert find_holiday(query, 2025) == dt.date(2025, 11, 27), query
    assert find_holiday("Christmas Day", 2022) == dt.date(2022, 12, 26)  # ties go to the later date: observed
    assert find_holiday("new years eve", 2024) is None and find_holiday("Axlearn Day", 2025) is None


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    year=st.sampled_from(YEARS),
    data=st.data(),
    before=st.lists(st.sampled_from(FILLER), max_size=3),
    after=st.lists(st.sampled_from(FILLER), max_size=3),
)
def test_a_name_with_extra_words_still_finds_the_holiday(year, data, before, after) -> None:
    table = us_holidays(year)
    name = data.draw(st.sampled_from([n for _, n in table]))
    query = " ".join([*before, name, *after])
    found = find_holiday(query, year)
    # the name scores 100; only a holiday that scores 100 too (its name is in the query, or
    # contains the name: "(observed)", "... Independence Day") can win the tie, by a later date
    allowed = {d for d, n in table if _processed(n) in _processed(query) or _processed(name) in _processed(n)}
    assert found in allowed


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(year=st.sampled_from(YEARS), data=st.data(), letter=st.sampled_from("abcdefghijklmnopqrstuvwxyz"))
def test_one_wrong_letter_in_a_long_name_still_finds_a_holiday(year, data, letter) -> None:
    long_names = [n for _, n in us_holidays(year) if len(_processed(n)) >= 11]
    name = data.draw(st.sampled_from(long_names))
    i = data.draw(st.integers(0, len(name) - 1))
    typo = name[:i] + letter + name[i + 1:]
    assert find_holiday(typo, year) is not None, typo
    assert find_holiday(typo.upper(), year) == find_holiday(typo.lower(), year)


@settings(max_examples=200, deadline=None)
@given(query=st.text(max_size=40), year=st.integers(1800, 2200))
def test_any_text_gives_a_holiday_of_that_year_or_none(query, year) -> None:
    found = find_holiday(query, year)
    assert found is None or found in {d for d, _ in us_holidays(year)}


def test_first_lookup_does_not_import_the_holidays_package() -> None:
    code = ("import sys; from trace_gym.toolsandbox.tools.holidays import find_holiday; "
            "assert find_holiday('christmas', 2025) is not None; print('holidays' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_tool_on_an_injected_world() -> None:
    from trace_gym.toolsandbox.toolbox import ToolBox
    from trace_gym.toolsandbox.world import World

    box = ToolBox(World.from_tables({}), ["search_holiday", "set_wifi_status"])
    got = box.call("search_holiday", {"holiday_name": "Thanksgiving dinner"})
    assert got.result == dt.datetime(2025, 11, 27, tzinfo=dt.UTC).timestamp()
    assert got.trace_arguments == {"holiday_name": "Thanksgiving dinner", "year": None}
    assert box.call("search_holiday", {"holiday_name": "x", "year": 10000}).error == "ValueError: year 10000 is out of range"
    box.call("set_wifi_status", {"on": False})
    assert box.call("search_holiday", {"holiday_name": "Christmas"}).error == "ConnectionError: Wifi is not enabled"
