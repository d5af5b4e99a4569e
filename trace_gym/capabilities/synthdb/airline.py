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
_CABIN_BASES = tuple((c, _BASE[c]) for c in _CABINS)
_LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ0123456789"


def _day(i: int) -> str:
    return _DAY_STR[i]


def _flights(rng: random.Random, routes: int) -> dict[str, Any]:
    codes = [c for c, _ in AIRPORTS]
    pairs: list[tuple[str, str]] = []
    while len(pairs) < routes:
        a, b = rng.sample(codes, 2)
        if (a, b) not in pairs:
            pairs.append((a, b))
    flights = {}
    n = 1
    r = rng.random
    for a, b in pairs:
        for origin, dest in ((a, b), (b, a)):
            # two departures per direction, at different hours and never at the same price on a day,
            # so "the cheapest" or "the latest" flight of a day is always one flight
            hours = rng.sample(range(5, 20), 2)
            seen_prices: set[tuple[str, str, int]] = set()
            for dep in hours:
                fn = f"HAT{n:03d}"
                n += 1
                dur = rng.randrange(1, 5)
                dates = {}
                dep_h, arr_h = f"{dep:02d}", f"{dep + dur:02d}"
                for d in _PAST_DAYS:
                    if r() < 0.1:
                        dates[d] = {"status": "cancelled"}
                    else:
                        dates[d] = {"status": "landed", "actual_departure_time_est": f"{d}T{dep_h}:0{int(r() * 10)}:00",
                                    "actual_arrival_time_est": f"{d}T{arr_h}:0{int(r() * 10)}:00"}
                if _HAS_TODAY:
                    dates[TODAY] = {"status": rng.choice(["flying", "on time", "delayed"])}
                for d in _FUTURE_DAYS:
                    prices = {}
                    for c, base in _CABIN_BASES:
                        p = int(base * (0.7 + 0.6 * r()))
                        while (d, c, p) in seen_prices:
                            p += 1
                        seen_prices.add((d, c, p))
                        prices[c] = p
                    dates[d] = {"status": "available",
                                "available_seats": {"basic_economy": 3 + int(r() * 17), "economy": 3 + int(r() * 17),
                                                    "business": 3 + int(r() * 17)},
                                "prices": prices}
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
    for p in rng.sample(saved, rng.randrange(0, len(saved) + 1)):
        passengers.append(dict(p))
    base = _BASE[cabin]
    flights_out = [{"origin": f["origin"], "destination": f["destination"], "flight_number": f["flight_number"], "date": d,
                    "price": int(base * (0.7 + 0.6 * r()))} for f, d in legs]
    total = sum(f["price"] for f in flights_out) * len(passengers) + (30 * len(passengers) if insurance == "yes" else 0)
    if recent:
        created = f"2024-05-15T{int(r() * 14):02d}:{int(r() * 60):02d}:00"
    else:
        created = f"2024-05-{1 + int(r() * 12):02d}T{int(r() * 24):02d}:{int(r() * 60):02d}:00"
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
    for first, last in names:
        uid = f"{first.lower()}_{last.lower()}_{rng.randrange(1000, 9999)}"
        cc, gc, cert = (f"{k}_{rng.randrange(1000000, 9999999)}" for k in ("credit_card", "gift_card", "certificate"))
        city, state, zp = rng.choice(CITIES)
        user = {
            "user_id": uid, "name": {"first_name": first, "last_name": last},
            "address": {"address1": f"{rng.randrange(100, 999)} {rng.choice(STREETS)}", "address2": f"Suite {rng.randrange(100, 999)}",
                        "city": city, "country": "USA", "state": state, "zip": f"{zp}{rng.randrange(10, 99)}"},
            "email": f"{first.lower()}.{last.lower()}{rng.randrange(1000, 9999)}@example.com",
            "dob": f"{rng.randrange(1950, 2002)}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 28):02d}",
            "payment_methods": {
                cc: {"source": "credit_card", "id": cc, "brand": rng.choice(["visa", "mastercard"]), "last_four": f"{rng.randrange(10000):04d}"},
                gc: {"source": "gift_card", "id": gc, "amount": float(rng.randrange(50, 500))},
                cert: {"source": "certificate", "id": cert, "amount": float(rng.choice([100, 150, 250]))},
            },
            "saved_passengers": [{"first_name": rng.choice(FIRST_NAMES), "last_name": rng.choice(LAST_NAMES),
                                  "dob": f"{rng.randrange(1950, 2015)}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 28):02d}"}],
            "membership": rng.choice(["regular", "silver", "gold"]),
            "reservations": [],
        }
        db["users"][uid] = user
        plan = list(_GUARANTEED) + [
            (rng.choice(_CABINS), rng.choice(["yes", "no"]), rng.random() < 0.2, rng.random() < 0.2) for _ in range(extra_reservations)
        ]
        rng.shuffle(plan)
        # the user's first credit card pays (the payment methods are keyed credit card first)
        card = next(m for m in user["payment_methods"] if m.startswith("credit_card"))
        user_reservations = user["reservations"]
        for cabin, insurance, recent, flown, *trip in plan:
            r = rng.random
            while True:
                rid = (letters[int(r() * 34)] + letters[int(r() * 34)] + letters[int(r() * 34)]
                       + letters[int(r() * 34)] + letters[int(r() * 34)] + letters[int(r() * 34)])
                if rid not in used:
                    used.add(rid)
                    break
            reservations[rid] = _reservation(rng, rid, user, pool, returns, card, cabin, insurance, recent, flown, *trip)
            user_reservations.append(rid)
    return db
