"""A small seeded airline database (flights, users, reservations) in τ²-bench's airline layout.

The clock is the policy's "now", 2024-05-15 15:00 EST.  Every user is guaranteed one
reservation of each kind the capability specs draw from (business; a one-way economy;
basic economy; insured economy; booked in the last 24 hours; already partly flown), each
with the cancellation-relevant facts set accordingly; ``extra_reservations`` adds
random distractors.
"""

from __future__ import annotations

import random
from datetime import date, timedelta
from typing import Any

from ...tau2.domains.airline import AIRPORTS
from ._draw import sample
from ._names import CITIES, FIRST_NAMES, LAST_NAMES, STREETS, pick_names

__all__ = ["generate_airline_db", "TODAY"]

TODAY = "2024-05-15"
_START = date(2024, 5, 10)
_DAYS = 12
_CABINS = ("basic_economy", "economy", "business")
_BASE = {"basic_economy": 70, "economy": 140, "business": 420}

# (cabin, insurance, booked recently, already flown); the plain economy one is always one way
_GUARANTEED = [
    ("business", "no", False, False),
    ("economy", "no", False, False, "one_way"),
    ("basic_economy", "no", False, False),
    ("economy", "yes", False, False),
    ("economy", "no", True, False),
    ("economy", "no", False, True),
]


_DAY_STR = [(_START + timedelta(days=i)).isoformat() for i in range(_DAYS + 3)]
# the flight calendar's days, in order: flown (or cancelled), today, bookable
_PAST_DAYS = [d for d in _DAY_STR[:_DAYS] if d < TODAY]
_HAS_TODAY = TODAY in _DAY_STR[:_DAYS]
_FUTURE_DAYS = [d for d in _DAY_STR[:_DAYS] if d > TODAY]
_B0, _B1, _B2 = (_BASE[c] for c in _CABINS)  # the base fares, in _CABINS order
_LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ0123456789"
_CODES = tuple(c for c, _ in AIRPORTS)
_HOURS = tuple(range(5, 20))
_NOW_STATUS = ("flying", "on time", "delayed")
_BRANDS = ("visa", "mastercard")
_CERTIFICATES = (100, 150, 250)
_MEMBERSHIPS = ("regular", "silver", "gold")
_YES_NO = ("yes", "no")
_TWO_DIGITS = tuple(f"{i:02d}" for i in range(100))
# (day, hour) -> the ten texts f"{day}T{hour:02d}:0{minute}:00" a landed flight's times are drawn from
_LANDED = {(d, h): tuple(f"{d}T{h:02d}:0{m}:00" for m in range(10)) for d in _PAST_DAYS for h in range(24)}


def _day(i: int) -> str:
    return _DAY_STR[i]


def _flights(rng: random.Random, routes: int) -> dict[str, Any]:
    pairs: list[tuple[str, str]] = []
    while len(pairs) < routes:
        a, b = sample(rng, _CODES, 2)
        if (a, b) not in pairs:
            pairs.append((a, b))
    flights = {}
    n = 1
    r = rng.random
    below = rng._randbelow  # randrange(a, b) is a + _randbelow(b - a), choice(s) is s[_randbelow(len(s))]: same draws
    for a, b in pairs:
        for origin, dest in ((a, b), (b, a)):
            # two departures per direction, at different hours and never at the same price on a day,
            # so "the cheapest" or "the latest" flight of a day is always one flight
            hours = sample(rng, _HOURS, 2)
            taken: list[tuple[int, int, int]] | None = None  # the first departure's prices, per bookable day
            for dep in hours:
                fn = f"HAT{n:03d}"
                n += 1
                dur = 1 + below(4)
                dates = {}
                dep_h, arr_h = _TWO_DIGITS[dep], _TWO_DIGITS[dep + dur]
                for d in _PAST_DAYS:
                    if r() < 0.1:
                        dates[d] = {"status": "cancelled"}
                    else:
                        dates[d] = {"status": "landed", "actual_departure_time_est": _LANDED[d, dep][int(r() * 10)],
                                    "actual_arrival_time_est": _LANDED[d, dep + dur][int(r() * 10)]}
                if _HAS_TODAY:
                    dates[TODAY] = {"status": _NOW_STATUS[below(3)]}
                day_prices = []
                for k, d in enumerate(_FUTURE_DAYS):
                    # one price per cabin (_CABINS order), never the other departure's price that day
                    p0, p1, p2 = int(_B0 * (0.7 + 0.6 * r())), int(_B1 * (0.7 + 0.6 * r())), int(_B2 * (0.7 + 0.6 * r()))
                    if taken is not None:
                        q0, q1, q2 = taken[k]
                        p0, p1, p2 = p0 + (p0 == q0), p1 + (p1 == q1), p2 + (p2 == q2)
                    day_prices.append((p0, p1, p2))
                    dates[d] = {"status": "available",
                                "available_seats": {"basic_economy": 3 + int(r() * 17), "economy": 3 + int(r() * 17),
                                                    "business": 3 + int(r() * 17)},
                                "prices": {"basic_economy": p0, "economy": p1, "business": p2}}  # _CABINS order
                taken = day_prices
                flights[fn] = {"flight_number": fn, "origin": origin, "destination": dest,
                               "scheduled_departure_time_est": f"{dep_h}:00:00",
                               "scheduled_arrival_time_est": f"{arr_h}:00:00", "dates": dates}
    return flights


def _reservation(rng: random.Random, rid: str, user: dict[str, Any], pool: list[dict[str, Any]],
                 returns: dict[tuple[str, str], list[dict[str, Any]]], card: str, cabin: str, insurance: str,
                 recent: bool, flown: bool, trip: str | None = None) -> dict[str, Any]:
    r = rng.random
    fl = pool[int(r() * len(pool))]
    first = int(r() * 5) if flown else 6 + int(r() * (_DAYS - 8))
    round_trip = r() < 0.5 if trip is None else trip == "round_trip"
    legs = [(fl, _DAY_STR[first])]
    if round_trip:
        back = returns[(fl["origin"], fl["destination"])]
        legs.append((back[int(r() * len(back))], _DAY_STR[first + 1 + int(r() * 2)]))
    name = user["name"]
    passengers = [{"first_name": name["first_name"], "last_name": name["last_name"], "dob": user["dob"]}]
    saved = user["saved_passengers"]
    for p in sample(rng, saved, rng._randbelow(len(saved) + 1)):  # rng.sample(saved, rng.randrange(0, len(saved) + 1))
        passengers.append(dict(p))
    base = _BASE[cabin]
    flights_out = [{"flight_number": f["flight_number"], "origin": f["origin"], "destination": f["destination"], "date": d,
                    "price": int(base * (0.7 + 0.6 * r()))} for f, d in legs]
    total = sum([f["price"] for f in flights_out]) * len(passengers) + (30 * len(passengers) if insurance == "yes" else 0)
    two = _TWO_DIGITS
    if recent:
        created = f"2024-05-15T{two[int(r() * 14)]}:{two[int(r() * 60)]}:00"
    else:
        created = f"2024-05-{two[1 + int(r() * 12)]}T{two[int(r() * 24)]}:{two[int(r() * 60)]}:00"
    bags = int(r() * 3)
    return {
        "reservation_id": rid, "user_id": user["user_id"], "origin": fl["origin"], "destination": fl["destination"],
        "flight_type": "round_trip" if round_trip else "one_way", "cabin": cabin, "flights": flights_out,
        "passengers": passengers, "payment_history": [{"payment_id": card, "amount": total}], "created_at": created,
        "total_baggages": bags, "nonfree_baggages": 0, "insurance": insurance, "status": None,
    }


def generate_airline_db(rng: random.Random, users: int = 3, extra_reservations: int = 2, routes: int = 2) -> dict[str, Any]:
    """A fresh airline database drawn from ``rng``; sizes are the difficulty knobs."""
    flights = _flights(rng, routes)
    db: dict[str, Any] = {"flights": flights, "users": {}, "reservations": {}}
    pool = list(flights.values())
    returns: dict[tuple[str, str], list[dict[str, Any]]] = {}  # (origin, destination) -> flights back, in order
    for f in pool:
        returns.setdefault((f["origin"], f["destination"]), [])
    for key, back in returns.items():
        back.extend(f for f in pool if f["origin"] == key[1] and f["destination"] == key[0])
    reservations = db["reservations"]
    used: set[str] = set()
    letters = _LETTERS
    names = pick_names(rng, users)
    # rng.randrange(a, b) is a + rng._randbelow(b - a) and rng.choice(s) is s[rng._randbelow(len(s))]:
    # calling _randbelow directly draws exactly the same numbers with less overhead
    below = rng._randbelow
    r = rng.random
    for first, last in names:
        uid = f"{first.lower()}_{last.lower()}_{1000 + below(8999)}"
        cc, gc, cert = (f"{k}_{1000000 + below(8999999)}" for k in ("credit_card", "gift_card", "certificate"))
        city, state, zp = CITIES[below(len(CITIES))]
        user = {
            "user_id": uid, "name": {"first_name": first, "last_name": last},
            "address": {"address1": f"{100 + below(899)} {STREETS[below(len(STREETS))]}", "address2": f"Suite {100 + below(899)}",
                        "city": city, "country": "USA", "state": state, "zip": f"{zp}{10 + below(89)}"},
            "email": f"{first.lower()}.{last.lower()}{1000 + below(8999)}@example.com",
            "dob": f"{1950 + below(52)}-{1 + below(12):02d}-{1 + below(27):02d}",
            "payment_methods": {
                cc: {"source": "credit_card", "id": cc, "brand": _BRANDS[below(2)], "last_four": f"{below(10000):04d}"},
                gc: {"source": "gift_card", "id": gc, "amount": float(50 + below(450))},
                cert: {"source": "certificate", "id": cert, "amount": float(_CERTIFICATES[below(3)])},
            },
            "saved_passengers": [{"first_name": FIRST_NAMES[below(len(FIRST_NAMES))], "last_name": LAST_NAMES[below(len(LAST_NAMES))],
                                  "dob": f"{1950 + below(65)}-{1 + below(12):02d}-{1 + below(27):02d}"}],
            "membership": _MEMBERSHIPS[below(3)],
            "reservations": [],
        }
        db["users"][uid] = user
        plan = list(_GUARANTEED) + [
            (_CABINS[below(3)], _YES_NO[below(2)], r() < 0.2, r() < 0.2) for _ in range(extra_reservations)
        ]
        rng.shuffle(plan)
        card = cc  # the user's first credit card pays (the payment methods are keyed credit card first)
        user_reservations = user["reservations"]
        for cabin, insurance, recent, flown, *trip in plan:
            while True:
                rid = (letters[int(r() * 34)] + letters[int(r() * 34)] + letters[int(r() * 34)]
                       + letters[int(r() * 34)] + letters[int(r() * 34)] + letters[int(r() * 34)])
                if rid not in used:
                    used.add(rid)
                    break
            reservations[rid] = _reservation(rng, rid, user, pool, returns, card, cabin, insurance, recent, flown, *trip)
            user_reservations.append(rid)
    return db
