"""A small seeded retail database (products, users, orders) in τ²-bench's retail layout.

Every user is guaranteed the situations the capability specs draw from: a delivered
order paid by card or PayPal, a delivered order paid by gift card, two pending orders
paid by card or PayPal (the gift card balance covers either), a processed order and a
cancelled one; ``extra_orders`` adds random distractors.
Every user holds a credit card and a gift card (some also PayPal).
"""

from __future__ import annotations

import itertools
import random
from typing import Any

from ._draw import sample
from ._names import CITIES, STREETS, pick_names

__all__ = ["generate_retail_db", "CATALOG"]

# name -> (base price, {option: values})
CATALOG: dict[str, tuple[float, dict[str, list[str]]]] = {
    "T-Shirt": (45.0, {"color": ["blue", "red", "black", "white"], "size": ["S", "M", "L", "XL"]}),
    "Running Shoes": (120.0, {"color": ["black", "white", "red"], "size": ["8", "9", "10", "11"]}),
    "Water Bottle": (35.0, {"capacity": ["500ml", "750ml", "1000ml"], "color": ["blue", "green", "red"]}),
    "Office Chair": (320.0, {"material": ["fabric", "leather", "mesh"], "color": ["black", "gray", "blue"]}),
    "Headphones": (180.0, {"type": ["over-ear", "on-ear", "in-ear"], "color": ["black", "white", "blue"]}),
    "Electric Kettle": (90.0, {"capacity": ["1L", "1.5L", "2L"], "material": ["plastic", "glass", "stainless steel"]}),
    "Backpack": (75.0, {"color": ["black", "navy", "green"], "size": ["small", "medium", "large"]}),
    "Desk Lamp": (55.0, {"color": ["black", "white", "silver"], "brightness": ["low", "medium", "high"]}),
}

_GUARANTEED = [("delivered", "card"), ("delivered", "gift_card"), ("pending", "card"), ("pending", "card"), ("processed", "any"), ("cancelled", "any")]
_STATUSES = ["delivered", "pending", "processed", "cancelled"]
_BRANDS = ("visa", "mastercard")
_CANCEL_REASONS = ("no longer needed", "ordered by mistake")
# Optional order fields, present as null until an action sets them (the benchmark's canonical form).
_UNSET = {"cancel_reason": None, "exchange_items": None, "exchange_new_items": None, "exchange_payment_method_id": None,
          "exchange_price_difference": None, "return_items": None, "return_payment_method_id": None}


_NAMES_SORTED = sorted(CATALOG)
# name -> (option names, every combination of option values, in itertools.product order)
_COMBOS = {name: (list(dims), list(itertools.product(*dims.values()))) for name, (_, dims) in CATALOG.items()}
_SPANS = {n: (10 ** (n - 1), 9 * 10 ** (n - 1)) for n in range(1, 13)}


def _digits(rng: random.Random, n: int, used: set[str]) -> str:
    lo, span = _SPANS[n] if n in _SPANS else (10 ** (n - 1), 9 * 10 ** (n - 1))
    r = rng.random
    while True:
        s = str(lo + int(r() * span))
        if s not in used:
            used.add(s)
            return s


def _products(rng: random.Random, n_products: int, variants: int, used: set[str]) -> dict[str, Any]:
    names = sample(rng, _NAMES_SORTED, min(n_products, len(CATALOG)))
    products = {}
    r = rng.random
    for name in names:
        base = CATALOG[name][0]
        dims, combos = _COMBOS[name]
        chosen = sample(rng, combos, min(variants, len(combos)))
        pid = _digits(rng, 10, used)
        vs = {}
        for i, combo in enumerate(chosen):
            iid = _digits(rng, 10, used)
            vs[iid] = {
                "item_id": iid,
                "options": dict(zip(dims, combo, strict=True)),
                "available": i < 2 or r() < 0.75,  # at least two available variants
                "price": round(base * (0.85 + 0.3 * r()), 2),
            }
        products[pid] = {"name": name, "product_id": pid, "variants": vs}
    return products


def _address(rng: random.Random) -> dict[str, str]:
    below = rng._randbelow  # see generate_retail_db
    city, state, zp = CITIES[below(len(CITIES))]
    return {
        "address1": f"{100 + below(899)} {STREETS[below(len(STREETS))]}",
        "address2": f"Suite {100 + below(899)}",
        "city": city,
        "country": "USA",
        "state": state,
        "zip": f"{zp}{10 + below(89)}",
    }


def generate_retail_db(rng: random.Random, users: int = 3, extra_orders: int = 2, products: int = 6, variants: int = 6) -> dict[str, Any]:
    """A fresh retail database drawn from ``rng``; sizes are the difficulty knobs."""
    used: set[str] = set()
    catalog = _products(rng, products, variants, used)
    product_list = list(catalog.values())
    n_products = len(product_list)
    variant_lists = [list(p["variants"].values()) for p in product_list]
    db: dict[str, Any] = {"products": catalog, "users": {}, "orders": {}}
    orders = db["orders"]
    names = pick_names(rng, users)
    r = rng.random
    # rng.randrange(a, b) is a + rng._randbelow(b - a) and rng.choice(s) is s[rng._randbelow(len(s))]:
    # calling _randbelow directly draws exactly the same numbers with less overhead
    below = rng._randbelow
    for first, last in names:
        suffix = _digits(rng, 4, used)
        uid = f"{first.lower()}_{last.lower()}_{suffix}"
        cc, gc = f"credit_card_{_digits(rng, 7, used)}", f"gift_card_{_digits(rng, 7, used)}"
        methods: dict[str, Any] = {
            cc: {"source": "credit_card", "id": cc, "brand": _BRANDS[below(2)], "last_four": f"{below(10000):04d}"},
            gc: {"source": "gift_card", "id": gc, "balance": float(20 + below(380))},
        }
        if r() < 0.5:
            pp = f"paypal_{_digits(rng, 7, used)}"
            methods[pp] = {"source": "paypal", "id": pp}
        user = {
            "user_id": uid,
            "name": {"first_name": first, "last_name": last},
            "address": _address(rng),
            "email": f"{first.lower()}.{last.lower()}{1000 + below(8999)}@example.com",
            "payment_methods": methods,
            "orders": [],
        }
        db["users"][uid] = user
        plan = list(_GUARANTEED) + [(_STATUSES[below(4)], "any") for _ in range(extra_orders)]
        rng.shuffle(plan)
        # the user's payment methods are fixed from here on (only the gift card balance may change)
        card_like = [m for m in methods if not m.startswith("gift_card")]
        any_method = sorted(methods)
        address = user["address"]
        user_orders = user["orders"]
        gift_card = methods[gc]
        k_max = min(3, n_products)
        for status, paid in plan:
            pm = gc if paid == "gift_card" else card_like[below(len(card_like))] if paid == "card" else any_method[below(len(any_method))]
            k = 1 + int(r() * k_max)
            start = int(r() * n_products)
            items = []
            for j in range(k):  # k different products, from a random starting point
                at = (start + j) % n_products
                prod = product_list[at]
                vs = variant_lists[at]
                v = vs[int(r() * len(vs))]
                items.append({"name": prod["name"], "product_id": prod["product_id"], "item_id": v["item_id"], "price": v["price"], "options": dict(v["options"])})
            oid = f"#W{_digits(rng, 7, used)}"
            total = round(sum([it["price"] for it in items]), 2)
            order = {
                "order_id": oid,
                "user_id": uid,
                "address": dict(address),
                "items": items,
                "status": status,
                "fulfillments": [] if status in ("pending", "cancelled") else [{"tracking_id": [_digits(rng, 12, used)], "item_ids": [it["item_id"] for it in items]}],
                "payment_history": [{"transaction_type": "payment", "amount": total, "payment_method_id": pm}],
                **_UNSET,
            }
            if status == "cancelled":
                order["cancel_reason"] = _CANCEL_REASONS[below(2)]
                order["payment_history"].append({"transaction_type": "refund", "amount": total, "payment_method_id": pm})
            orders[oid] = order
            user_orders.append(oid)
            if status == "pending" and pm != gc and total > gift_card["balance"]:
                # the gift card can always cover a pending card-paid order (payment switches stay possible)
                gift_card["balance"] = float(int(total) + 5 + below(95))
    return db
