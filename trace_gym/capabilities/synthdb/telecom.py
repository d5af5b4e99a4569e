"""A small seeded telecom world: the carrier's records and the user's phone, in τ²-bench's telecom layout.

:func:`generate_telecom_world` returns one dict holding

* the **agent database** in the benchmark's canonical form (``plans``, ``customers``,
  ``lines``, ``bills``, ``devices``: lists of records with every field, as
  :func:`trace_gym.tau2.domains.telecom_db.normalise_agent_db` writes them);
* the **user database** — the phone in the user's hand — in its canonical form
  (``device``, ``surroundings``, as ``normalise_user_db`` writes them);
* the scenario material ``phone``: one row naming whose phone it is (``customer_id``,
  ``full_name``, ``line_id``, ``phone_number``, ``plan_id``), the bills that matter
  (``overdue_bill_id``, ``issued_bill_id``, ``draft_bill_id``), the ``issue`` the world
  was drawn with, and amounts a user may ask to refuel (``refuel_gb``, ``refuel_charge``,
  ``too_much_gb``).  It is never part of the state tools see.

Every customer has one to ``1 + extra_lines`` active lines (one device each), a paid
January bill, an issued February bill and a March draft.  One customer owns the phone.
Exactly one **issue** is drawn for the phone, with the ``issue_*`` sizes as relative
weights (all zero: ``none``); it is put in place with the benchmark engine's own set-up
functions (``turn_airplane_mode_on``, ``set_user_location``, ...) and the account/phone
sync, so the phone's network state is the one the engine derives — there is no second
phone model here:

==================  ======================================================================
``none``            the phone works
``airplane_mode``   airplane mode is on (no service)
``data_off``        mobile data is switched off
``data_saver``      data saver mode is on (slow data)
``roaming_device``  abroad; the line allows roaming, the phone's data roaming is off
``roaming_line``    abroad; the phone's data roaming is on, the line's roaming is disabled
``roaming_both``    abroad; both are off
``data_exhausted``  the line used more than its plan's allowance (under 1 GB over)
``overdue_bill``    the January bill is overdue
==================  ======================================================================

The generator is deterministic for a seeded ``random.Random`` and draws nothing else.
Error contract: an unknown size or one outside :data:`SIZES` raises ``ValueError`` naming it.
"""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

from ._names import CITIES, STREETS, pick_names

__all__ = ["generate_telecom_world", "split_world", "SIZES", "ISSUES", "AGENT_TABLES", "USER_KEYS", "TABLE_KEYS",
           "PHONE_FIELDS"]

ISSUES = ("none", "airplane_mode", "data_off", "data_saver", "roaming_device", "roaming_line", "roaming_both",
          "data_exhausted", "overdue_bill")
SIZES: dict[str, tuple[int, int]] = {"customers": (1, 8), "extra_lines": (0, 3),
                                     **{f"issue_{name}": (0, 100) for name in ISSUES}}
AGENT_TABLES = ("plans", "customers", "lines", "bills", "devices")
USER_KEYS = ("device", "surroundings")
TABLE_KEYS = {"plans": "plan_id", "customers": "customer_id", "lines": "line_id", "bills": "bill_id", "devices": "device_id"}
PHONE_FIELDS = ("customer_id", "full_name", "line_id", "phone_number", "plan_id", "issue", "abroad", "overdue_bill_id",
                "issued_bill_id", "draft_bill_id", "refuel_gb", "refuel_charge", "too_much_gb")

# (plan id, name, data limit GB, monthly price, refuelling price per GB)
_PLANS = (("P2001", "Starter", 3.0, 30.0, 6.0), ("P2002", "Everyday", 10.0, 50.0, 4.0),
          ("P2003", "Premium", 25.0, 70.0, 2.5), ("P2004", "Unlimited Max", 999.0, 90.0, 0.5),
          ("P2005", "Family Share", 40.0, 110.0, 3.0))
_LIMITED = tuple(p[0] for p in _PLANS if p[2] < 100)
_MODELS = (("phone", "Pixel 8", True), ("phone", "iPhone 15", True), ("phone", "Galaxy S24", True),
           ("phone", "Moto G", False), ("phone", "Nokia X30", True))
_METHODS = ("Credit Card", "Debit Card", "PayPal")
_ROAMING = ("roaming_device", "roaming_line", "roaming_both")
# issue -> user-side set-up functions of the engine's phone (name, keyword arguments), run in order
_PHONE_SETUP: dict[str, tuple[tuple[str, dict[str, Any]], ...]] = {
    "airplane_mode": (("turn_airplane_mode_on", {}),),
    "data_off": (("turn_data_off", {}),),
    "data_saver": (("turn_data_saver_mode_on", {}),),
    "roaming_device": (("set_user_location", {"abroad": True}), ("turn_roaming_off", {})),
    "roaming_line": (("set_user_location", {"abroad": True}), ("turn_roaming_on", {})),
    "roaming_both": (("set_user_location", {"abroad": True}), ("turn_roaming_off", {})),
}


def _check_sizes(sizes: dict[str, int]) -> None:
    for key, value in sizes.items():
        if key not in SIZES:
            raise ValueError(f"unknown telecom world size {key!r}; expected one of {sorted(SIZES)}")
        lo, hi = SIZES[key]
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise ValueError(f"telecom world size {key} must be an integer in [{lo}, {hi}], got {value!r}")


def _draw_issue(rng: random.Random, sizes: dict[str, int]) -> str:
    weights = [sizes.get(f"issue_{name}", 0) for name in ISSUES]
    total = sum(weights)
    if total <= 0:
        return "none"
    x = rng._randbelow(total)
    for name, w in zip(ISSUES, weights, strict=True):
        if x < w:
            return name
        x -= w
    return ISSUES[-1]  # not reached


class _Ids:
    def __init__(self, rng: random.Random):
        self.rng, self.used = rng, set()

    def __call__(self, prefix: str, digits: int = 4) -> str:
        while True:
            key = f"{prefix}{self.rng._randbelow(9 * 10 ** (digits - 1)) + 10 ** (digits - 1)}"
            if key not in self.used:
                self.used.add(key)
                return key


def _bill(bill_id: str, cid: str, month: int, lines: list[dict[str, Any]], prices: dict[str, float], status: str) -> dict[str, Any]:
    issued = f"2025-{month:02d}-05"
    items = [{"description": f"Plan charge - Line {ln['phone_number']}", "amount": prices[ln["plan_id"]], "date": issued,
              "item_type": "Plan Charge"} for ln in lines]
    end = {1: 31, 2: 28, 3: 31}[month]
    return {"bill_id": bill_id, "customer_id": cid, "period_start": f"2025-{month:02d}-01", "period_end": f"2025-{month:02d}-{end}",
            "issue_date": issued, "total_due": round(sum(i["amount"] for i in items), 2), "due_date": f"2025-{month:02d}-19",
            "line_items": items, "status": status}


def _agent_db(rng: random.Random, customers: int, extra_lines: int) -> tuple[dict[str, Any], list[list[dict[str, Any]]]]:
    ids = _Ids(rng)
    below, r = rng._randbelow, rng.random
    plans = [{"plan_id": p, "name": n, "data_limit_gb": lim, "price_per_month": price, "data_refueling_price_per_gb": gb}
             for p, n, lim, price, gb in _PLANS]
    prices = {p["plan_id"]: p["price_per_month"] for p in plans}
    db: dict[str, Any] = {"plans": plans, "customers": [], "lines": [], "bills": [], "devices": []}
    per_customer: list[list[dict[str, Any]]] = []
    for first, last in pick_names(rng, customers):
        cid = ids("C")
        lines = []
        for _ in range(1 + below(extra_lines + 1)):
            dtype, model, esim = _MODELS[below(len(_MODELS))]
            device = {"device_id": ids("D"), "device_type": dtype, "model": model, "imei": ids("", 15), "is_esim_capable": esim,
                      "activated": True, "activation_date": f"2024-{1 + below(12):02d}-{1 + below(28):02d}T10:00:00",
                      "last_esim_transfer_date": None}
            plan = plans[below(len(plans))]
            used = round(r() * min(plan["data_limit_gb"], 30.0) * 0.9, 1)
            line = {"line_id": ids("L"), "phone_number": f"555-{ids('', 3)}-{ids('', 4)}", "status": "Active",
                    "plan_id": plan["plan_id"], "device_id": device["device_id"], "data_used_gb": used, "data_refueling_gb": 0.0,
                    "roaming_enabled": r() < 0.5, "contract_end_date": f"{2026 + below(2)}-{1 + below(12):02d}-28",
                    "last_plan_change_date": f"2024-{1 + below(12):02d}-10", "last_sim_replacement_date": None,
                    "suspension_start_date": None}
            db["devices"].append(device)
            db["lines"].append(line)
            lines.append(line)
        bills = [_bill(ids("B"), cid, 1, lines, prices, "Paid"), _bill(ids("B"), cid, 2, lines, prices, "Issued"),
                 _bill(ids("B"), cid, 3, lines, prices, "Draft")]
        db["bills"].extend(bills)
        city, state, zp = CITIES[below(len(CITIES))]
        method = _METHODS[below(len(_METHODS))]
        db["customers"].append({
            "customer_id": cid, "full_name": f"{first} {last}", "date_of_birth": f"{1960 + below(40)}-{1 + below(12):02d}-{1 + below(28):02d}",
            "email": f"{first.lower()}.{last.lower()}{below(900) + 100}@example.com", "phone_number": lines[0]["phone_number"],
            "address": {"street": f"{100 + below(899)} {STREETS[below(len(STREETS))]}", "city": city, "state": state,
                        "zip_code": f"{zp}{10 + below(89)}"},
            "account_status": "Active",
            "payment_methods": [{"method_type": method, "account_number_last_4": f"{below(10000):04d}",
                                 "expiration_date": f"{1 + below(12):02d}/{2026 + below(3)}"}],
            "line_ids": [ln["line_id"] for ln in lines], "bill_ids": [b["bill_id"] for b in bills],
            "created_at": f"2023-{1 + below(12):02d}-{1 + below(28):02d}T09:00:00", "last_extension_date": None,
            "goodwill_credit_used_this_year": 0.0,
        })
        per_customer.append(lines)
    return db, per_customer


def _default_user_db() -> dict[str, Any]:
    from ...tau2.domains.telecom_db import normalise_user_db

    return normalise_user_db({"device": {}, "surroundings": {}})


def _settle(agent: dict[str, Any], user: dict[str, Any], owner: dict[str, Any], issue: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The phone set up by the engine's own functions, then synced with the account (as the engine syncs)."""
    from ...tau2.db import BaseDb, DbState
    from ...tau2.domains.telecom import TelecomTools, TelecomUserTools, sync_tools

    agent_db, user_db = DbState(BaseDb(agent, "TelecomDB")), DbState(BaseDb(user, "TelecomUserDB"))
    env = SimpleNamespace(db=agent_db, user_db=user_db)
    env.tools, env.user_tools = TelecomTools(env, agent_db), TelecomUserTools(env, user_db)
    env.user_tools.set_user_info(owner["full_name"], owner["phone_number"])
    sync_tools(env)  # line active, roaming allowed, data allowance, payment request: as the account says
    for name, kwargs in _PHONE_SETUP.get(issue, ()):
        env.user_tools.env_function(name)(**kwargs)
    env.user_tools.simulate_network_search()
    sync_tools(env)
    return agent_db.to_dict(), user_db.to_dict()


def generate_telecom_world(rng: random.Random, **sizes: int) -> dict[str, Any]:
    """A fresh telecom world drawn from ``rng`` (see the module docstring); ``sizes`` are the difficulty knobs."""
    _check_sizes(sizes)
    agent, per_customer = _agent_db(rng, sizes.get("customers", 3), sizes.get("extra_lines", 1))
    issue = _draw_issue(rng, sizes)
    below = rng._randbelow
    k = below(len(per_customer))
    customer, lines = agent["customers"][k], per_customer[k]
    line = lines[below(len(lines))]
    bills = [b for b in agent["bills"] if b["customer_id"] == customer["customer_id"]]
    plan_by_id = {p["plan_id"]: p for p in agent["plans"]}
    if issue in _ROAMING:
        line["roaming_enabled"] = issue == "roaming_device"
    if issue == "data_exhausted":
        line["plan_id"] = _LIMITED[below(len(_LIMITED))]
        line["data_used_gb"] = round(plan_by_id[line["plan_id"]]["data_limit_gb"] + 0.1 * (1 + below(9)), 1)
    if issue == "overdue_bill":
        bills[0]["status"] = "Overdue"
    plan = plan_by_id[line["plan_id"]]
    refuel_gb = float(1 + below(2))
    phone = {"customer_id": customer["customer_id"], "full_name": customer["full_name"], "line_id": line["line_id"],
             "phone_number": line["phone_number"], "plan_id": plan["plan_id"], "issue": issue,
             "abroad": issue in _ROAMING, "overdue_bill_id": bills[0]["bill_id"] if issue == "overdue_bill" else None,
             "issued_bill_id": bills[1]["bill_id"], "draft_bill_id": bills[2]["bill_id"], "refuel_gb": refuel_gb,
             "refuel_charge": round(refuel_gb * plan["data_refueling_price_per_gb"], 2), "too_much_gb": float(3 + below(3))}
    agent, user = _settle(agent, _default_user_db(), phone, issue)
    return {**agent, **user, "phone": [phone]}


def split_world(world: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(agent database, user database)`` of a world (shared, not copied; the material is left out)."""
    return {t: world[t] for t in AGENT_TABLES}, {k: world[k] for k in USER_KEYS}
