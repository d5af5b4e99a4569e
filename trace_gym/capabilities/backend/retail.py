"""Retail tool behaviour over a plain-dict database (same layout as τ²-bench's retail ``db.json``).

The capability environments' fallback when the project's τ²-bench engine
(:mod:`trace_gym.tau2.engine`) is not available.  Every tool checks all of its
preconditions before it changes anything, so a rejected call leaves the database untouched.
"""

from __future__ import annotations

import json
from typing import Any

from ...core.tools import ToolError

__all__ = ["RetailBackend"]


def _is_gift_card(pm: dict[str, Any]) -> bool:
    return pm.get("source") == "gift_card"


class RetailBackend:
    """Implements the retail tools; ``db`` is mutated in place."""

    domain = "retail"

    def __init__(self, db: dict[str, Any]):
        self.db = db

    # ----------------------------------------------------------------- lookups
    def _order(self, order_id: str) -> dict[str, Any]:
        order = self.db["orders"].get(order_id)
        if order is None:
            raise ToolError("Order not found")
        return order

    def _user(self, user_id: str) -> dict[str, Any]:
        user = self.db["users"].get(user_id)
        if user is None:
            raise ToolError("User not found")
        return user

    def _product(self, product_id: str) -> dict[str, Any]:
        product = self.db["products"].get(product_id)
        if product is None:
            raise ToolError("Product not found")
        return product

    def _variant(self, product_id: str, item_id: str) -> dict[str, Any]:
        variant = self._product(product_id)["variants"].get(item_id)
        if variant is None:
            raise ToolError("Variant not found")
        return variant

    def _payment_method(self, user_id: str, pm_id: str) -> dict[str, Any]:
        pm = self._user(user_id)["payment_methods"].get(pm_id)
        if pm is None:
            raise ToolError("Payment method not found")
        return pm

    @staticmethod
    def _check_counts(order: dict[str, Any], item_ids: list[str], message: str) -> None:
        present = [it["item_id"] for it in order["items"]]
        for iid in item_ids:
            if item_ids.count(iid) > present.count(iid):
                raise ToolError(message.format(item_id=iid))

    # ----------------------------------------------------------------- read tools
    def calculate(self, expression: str) -> str:
        if not all(ch in "0123456789+-*/(). " for ch in expression):
            raise ToolError("Invalid characters in expression")
        from .arith import evaluate

        return str(round(float(evaluate(expression)), 2))

    def find_user_id_by_email(self, email: str) -> str:
        wanted = email.strip().lower()
        for uid, user in self.db["users"].items():
            if user["email"].lower() == wanted:
                return uid
        raise ToolError("User not found")

    def find_user_id_by_name_zip(self, first_name: str, last_name: str, zip: str) -> str:  # noqa: A002
        f, la = first_name.strip().lower(), last_name.strip().lower()
        for uid, user in self.db["users"].items():
            name = user["name"]
            if name["first_name"].lower() == f and name["last_name"].lower() == la and user["address"]["zip"] == zip:
                return uid
        raise ToolError("User not found")

    def get_order_details(self, order_id: str) -> dict[str, Any]:
        return self._order(order_id)

    def get_product_details(self, product_id: str) -> dict[str, Any]:
        return self._product(product_id)

    def get_item_details(self, item_id: str) -> dict[str, Any]:
        for product in self.db["products"].values():
            if item_id in product["variants"]:
                return product["variants"][item_id]
        raise ToolError("Item not found")

    def get_user_details(self, user_id: str) -> dict[str, Any]:
        return self._user(user_id)

    def list_all_product_types(self) -> str:
        return json.dumps({p["name"]: p["product_id"] for p in self.db["products"].values()}, sort_keys=True)

    def transfer_to_human_agents(self, summary: str) -> str:
        return "Transfer successful"

    # ----------------------------------------------------------------- write tools
    def cancel_pending_order(self, order_id: str, reason: str) -> dict[str, Any]:
        order = self._order(order_id)
        if order["status"] != "pending":
            raise ToolError("Non-pending order cannot be cancelled")
        if reason not in ("no longer needed", "ordered by mistake"):
            raise ToolError("Invalid reason")
        methods = [self._payment_method(order["user_id"], p["payment_method_id"]) for p in order["payment_history"]]
        refunds = []
        for pay, pm in zip(order["payment_history"], methods, strict=False):
            refunds.append({"transaction_type": "refund", "amount": pay["amount"], "payment_method_id": pay["payment_method_id"]})
            if _is_gift_card(pm):
                pm["balance"] = round(pm["balance"] + pay["amount"], 2)
        order["status"] = "cancelled"
        order["cancel_reason"] = reason
        order["payment_history"].extend(refunds)
        return order

    def _price_difference(self, order: dict[str, Any], item_ids: list[str], new_item_ids: list[str]) -> float:
        diff = 0.0
        for iid, nid in zip(item_ids, new_item_ids, strict=False):
            item = next((it for it in order["items"] if it["item_id"] == iid), None)
            if item is None:
                raise ToolError(f"Item {iid} not found")
            variant = self._variant(item["product_id"], nid)
            if not variant["available"]:
                raise ToolError(f"New item {nid} not found or available")
            diff += variant["price"] - item["price"]
        return round(diff, 2)

    def exchange_delivered_order_items(self, order_id: str, item_ids: list[str], new_item_ids: list[str], payment_method_id: str) -> dict[str, Any]:
        order = self._order(order_id)
        if order["status"] != "delivered":
            raise ToolError("Non-delivered order cannot be exchanged")
        self._check_counts(order, item_ids, "Number of {item_id} not found.")
        if len(item_ids) != len(new_item_ids):
            raise ToolError("The number of items to be exchanged should match.")
        diff = self._price_difference(order, item_ids, new_item_ids)
        pm = self._payment_method(order["user_id"], payment_method_id)
        if _is_gift_card(pm) and pm["balance"] < diff:
            raise ToolError("Insufficient gift card balance to pay for the price difference")
        order["status"] = "exchange requested"
        order["exchange_items"] = sorted(item_ids)
        order["exchange_new_items"] = sorted(new_item_ids)
        order["exchange_payment_method_id"] = payment_method_id
        order["exchange_price_difference"] = diff
        return order

    def modify_pending_order_address(self, order_id: str, address1: str, address2: str, city: str, state: str, country: str, zip: str) -> dict[str, Any]:  # noqa: A002
        order = self._order(order_id)
        if "pending" not in order["status"]:
            raise ToolError("Non-pending order cannot be modified")
        order["address"] = {"address1": address1, "address2": address2, "city": city, "country": country, "state": state, "zip": zip}
        return order

    def modify_pending_order_items(self, order_id: str, item_ids: list[str], new_item_ids: list[str], payment_method_id: str) -> dict[str, Any]:
        order = self._order(order_id)
        if order["status"] != "pending":
            raise ToolError("Non-pending order cannot be modified")
        self._check_counts(order, item_ids, "{item_id} not found")
        if len(item_ids) != len(new_item_ids):
            raise ToolError("The number of items to be exchanged should match")
        if any(a == b for a, b in zip(item_ids, new_item_ids, strict=False)):
            raise ToolError("The new item id should be different from the old item id")
        diff = self._price_difference(order, item_ids, new_item_ids)
        pm = self._payment_method(order["user_id"], payment_method_id)
        if _is_gift_card(pm) and pm["balance"] < diff:
            raise ToolError("Insufficient gift card balance to pay for the new item")
        order["payment_history"].append(
            {"transaction_type": "payment" if diff > 0 else "refund", "amount": abs(diff), "payment_method_id": payment_method_id}
        )
        if _is_gift_card(pm):
            pm["balance"] = round(pm["balance"] - diff, 2)
        for iid, nid in zip(item_ids, new_item_ids, strict=False):
            item = next(it for it in order["items"] if it["item_id"] == iid)
            variant = self._variant(item["product_id"], nid)
            item.update(item_id=nid, price=variant["price"], options=dict(variant["options"]))
        order["status"] = "pending (item modified)"
        return order

    def modify_pending_order_payment(self, order_id: str, payment_method_id: str) -> dict[str, Any]:
        order = self._order(order_id)
        if "pending" not in order["status"]:
            raise ToolError("Non-pending order cannot be modified")
        pm = self._payment_method(order["user_id"], payment_method_id)
        history = order["payment_history"]
        if len(history) != 1 or history[0]["transaction_type"] != "payment":
            raise ToolError("There should be exactly one payment for a pending order")
        old_id = history[0]["payment_method_id"]
        if old_id == payment_method_id:
            raise ToolError("The new payment method should be different from the current one")
        amount = history[0]["amount"]
        if _is_gift_card(pm) and pm["balance"] < amount:
            raise ToolError("Insufficient gift card balance to pay for the order")
        old_pm = self._payment_method(order["user_id"], old_id)
        history.append({"transaction_type": "payment", "amount": amount, "payment_method_id": payment_method_id})
        history.append({"transaction_type": "refund", "amount": amount, "payment_method_id": old_id})
        if _is_gift_card(pm):
            pm["balance"] = round(pm["balance"] - amount, 2)
        if _is_gift_card(old_pm):
            old_pm["balance"] = round(old_pm["balance"] + amount, 2)
        return order

    def modify_user_address(self, user_id: str, address1: str, address2: str, city: str, state: str, country: str, zip: str) -> dict[str, Any]:  # noqa: A002
        user = self._user(user_id)
        user["address"] = {"address1": address1, "address2": address2, "city": city, "country": country, "state": state, "zip": zip}
        return user

    def return_delivered_order_items(self, order_id: str, item_ids: list[str], payment_method_id: str) -> dict[str, Any]:
        order = self._order(order_id)
        if order["status"] != "delivered":
            raise ToolError("Non-delivered order cannot be returned")
        pm = self._payment_method(order["user_id"], payment_method_id)
        if not _is_gift_card(pm) and payment_method_id != order["payment_history"][0]["payment_method_id"]:
            raise ToolError("Payment method should be the original payment method")
        self._check_counts(order, item_ids, "Some item not found")
        order["status"] = "return requested"
        order["return_items"] = sorted(item_ids)
        order["return_payment_method_id"] = payment_method_id
        return order
