"""Synthetic databases: seeded, small, fast, and covering what the specs draw from."""

from __future__ import annotations

import random

import pytest

from trace_gym.capabilities.synthdb import generate_airline_db, generate_retail_db
from trace_gym.capabilities.synthdb.airline import TODAY


@pytest.mark.parametrize("gen", [generate_retail_db, generate_airline_db])
def test_same_seed_same_database_different_seed_different(gen):
    assert gen(random.Random(7)) == gen(random.Random(7))
    assert gen(random.Random(7)) != gen(random.Random(8))


def test_retail_coverage_for_every_user():
    for seed in range(20):
        db = generate_retail_db(random.Random(seed), users=4, extra_orders=3)
        assert len(db["users"]) == 4
        for uid, user in db["users"].items():
            orders = [db["orders"][o] for o in user["orders"]]
            assert all(o["user_id"] == uid for o in orders)
            statuses = [o["status"] for o in orders]
            assert {"delivered", "pending", "processed", "cancelled"} <= set(statuses)
            sources = {pm["source"] for pm in user["payment_methods"].values()}
            assert {"credit_card", "gift_card"} <= sources
            gift = next(pm for pm in user["payment_methods"].values() if pm["source"] == "gift_card")
            delivered_by = {o["payment_history"][0]["payment_method_id"].split("_")[0] for o in orders if o["status"] == "delivered"}
            assert "gift" in delivered_by and delivered_by - {"gift"}, "a delivered order paid by gift card and one by card"
            card_pending = [o for o in orders if o["status"] == "pending" and not o["payment_history"][0]["payment_method_id"].startswith("gift")]
            assert len(card_pending) >= 2 and all(o["payment_history"][0]["amount"] <= gift["balance"] for o in card_pending)
        for o in db["orders"].values():
            for it in o["items"]:
                variant = db["products"][it["product_id"]]["variants"][it["item_id"]]
                assert variant["price"] == it["price"] and variant["options"] == it["options"]
        for p in db["products"].values():
            combos = [tuple(v["options"].items()) for v in p["variants"].values()]
            assert len(combos) == len(set(combos)), "variants of a product differ in options"
            assert sum(v["available"] for v in p["variants"].values()) >= 2


def test_airline_coverage_for_every_user():
    for seed in range(20):
        db = generate_airline_db(random.Random(seed), users=3)
        for user in db["users"].values():
            res = [db["reservations"][r] for r in user["reservations"]]
            future = [r for r in res if all(f["date"] > TODAY for f in r["flights"])]
            assert {r["cabin"] for r in future} >= {"basic_economy", "economy", "business"}
            assert any(r["insurance"] == "yes" for r in future)
            assert any(r["created_at"] >= "2024-05-14T15:00:00" for r in future)
            assert any(any(f["date"] < TODAY for f in r["flights"]) for r in res)
            for r in res:
                for f in r["flights"]:
                    assert f["flight_number"] in db["flights"] and f["date"] in db["flights"][f["flight_number"]]["dates"]
        for f in db["flights"].values():
            for d, inst in f["dates"].items():
                assert (inst["status"] == "available") == (d > TODAY)


def test_airline_day_choices_are_unambiguous():
    for seed in range(20):
        db = generate_airline_db(random.Random(seed), routes=3)
        by_route: dict[tuple[str, str], list[dict]] = {}
        for f in db["flights"].values():
            by_route.setdefault((f["origin"], f["destination"]), []).append(f)
        for flights in by_route.values():
            assert len({f["scheduled_departure_time_est"] for f in flights}) == len(flights)
            for d in flights[0]["dates"]:
                if d > TODAY:
                    for cabin in ("basic_economy", "economy", "business"):
                        prices = [f["dates"][d]["prices"][cabin] for f in flights]
                        assert len(set(prices)) == len(prices)
