"""Record upstream's answers to made-up holiday lookups (``data/upstream_holidays.json``).

Run with upstream's pinned libraries on the path, e.g.::

    pip install --target /tmp/upstream holidays==0.51 rapidfuzz==3.9.3 --no-deps
    PYTHONPATH=/tmp/upstream python tests/toolsandbox/record_upstream_holidays.py

For each generated ``(name, year)`` it stores what upstream's ``search_holiday`` computes
(the date of the best ``partial_ratio`` match above 90, ``null``, or the error line), and the
holiday table of a range of years.  The names are generated from a fixed seed: the real
names decorated with extra words, misspelled, re-cased, common aliases and random text.
"""

from __future__ import annotations

import json
import random
import string
from pathlib import Path

import holidays
import rapidfuzz
from rapidfuzz import fuzz, utils

assert holidays.__version__ == "0.51" and rapidfuzz.__version__ == "3.9.3", "needs upstream's pinned versions"

OUT = Path(__file__).parent / "data" / "upstream_holidays.json"
WORDS = ["the", "day", "holiday", "weekend", "celebration", "party", "federal", "US", "national", "dinner",
         "observed", "eve", "2025", "next", "this", "year's", "big", "american", "of", "off", "morning"]
ALIASES = ["Xmas", "X-mas", "4th of July", "Fourth of July", "July 4th", "MLK day", "MLK Jr Day", "Presidents Day",
           "President's Day", "Turkey day", "Veteran's day", "Veterans", "new years", "new years eve", "New Year",
           "labour day", "Columbus", "Indigenous Peoples Day", "Juneteenth", "Memorial", "Easter", "Halloween",
           "Valentine's Day", "Mother's Day", "Axlearn Day", "Christmas Eve", "Thanks giving", "Independence",
           "Armistice Day", "Washington", "Martin Luther King", "Labor", "Christmas", "Thanksgiving Day",
           "Independence Day (observed)", "", " ", "!!!", "day", "d", "é", "日本", "Noël"]


def lookup(name: str, year: int) -> str | None:
    """Upstream's algorithm on upstream's libraries: ISO date, None, or the error line."""
    try:
        ranked = sorted(
            ((fuzz.partial_ratio(name, n, processor=utils.default_process), d, n)
             for d, n in holidays.country_holidays(country="US", years=year).items()),
            reverse=True,
        )
    except Exception as exc:
        return f"!{type(exc).__name__}: {exc}"
    return ranked[0][1].isoformat() if ranked and ranked[0][0] > 90 else None


def misspell(rng: random.Random, text: str) -> str:
    chars = list(text)
    for _ in range(rng.choice([1, 1, 2])):
        i = rng.randrange(len(chars)) if chars else 0
        op = rng.choice("dist")
        if op == "d" and chars:
            del chars[i]
        elif op == "i":
            chars.insert(i, rng.choice(string.ascii_lowercase))
        elif op == "s" and chars:
            chars[i] = rng.choice(string.ascii_lowercase)
        elif op == "t" and i + 1 < len(chars):
            chars[i], chars[i + 1] = chars[i + 1], chars[i]
    return "".join(chars)


def main() -> None:
    rng = random.Random(20250604)
    years = [2025, 2024, 2026, 2021, 2022, 1960, 1975, 1950, 1890, 2100]
    names = sorted({n for y in years for n in holidays.country_holidays(country="US", years=y).values()})
    queries: list[tuple[str, int]] = []
    for _ in range(1200):
        year = rng.choice(years)
        base = rng.choice(names)
        kind = rng.random()
        if kind < 0.35:
            words = [rng.choice(WORDS) for _ in range(rng.randint(1, 3))]
            cut = rng.randint(0, len(words))
            q = " ".join(words[:cut] + [base] + words[cut:])
        elif kind < 0.7:
            q = misspell(rng, base)
        elif kind < 0.8:
            q = rng.choice([base.upper(), base.lower(), base.title(), base.replace(" ", "-"), base.replace("'", "")])
        elif kind < 0.92:
            q = rng.choice(ALIASES)
        else:
            q = "".join(rng.choice(string.ascii_letters + " ") for _ in range(rng.randint(0, 30)))
        queries.append((q, year))
    queries += [("Christmas Day", y) for y in (0, -3, 1, 1870, 9999, 10000, 10**6)]
    answers = [[q, y, lookup(q, y)] for q, y in queries]
    tables = {str(y): [[d.isoformat(), n] for d, n in sorted(holidays.country_holidays(country="US", years=y).items())]
              for y in range(1865, 2151)}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"holidays": holidays.__version__, "rapidfuzz": rapidfuzz.__version__,
                               "lookups": answers, "tables": tables}, ensure_ascii=False, separators=(",", ":")) + "\n",
                   encoding="utf-8")
    print(f"{len(answers)} lookups, {len(tables)} years -> {OUT}")


if __name__ == "__main__":
    main()
