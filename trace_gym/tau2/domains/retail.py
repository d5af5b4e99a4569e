"""τ²-bench ``retail`` domain: products with variants, users with payment methods, orders.

Behaviour follows tau2 1.0.1, including its quirks: address and payment changes
accept any status containing ``"pending"`` (so ``"pending (item modified)"`` too)
while cancellation and item changes need exactly ``"pending"``; item changes write
the price/options of the *last* new variant into every changed item and record the
unrounded price difference, while gift-card balances are rounded to cents.
"""

from __future__ import annotations

import json
from typing import Any

from trace_gym.tau2.domain_spec import DomainSpec
from trace_gym.tau2.toolkit import Model, Toolkit, tool
from trace_gym.tau2.validation import FLOAT, STR, Field, build, literal

from ._common import calculate
from ._records import conform

_ADDRESS = {
    "address1": Field(STR), "address2": Field(STR), "city": Field(STR),
    "country": Field(STR), "state": Field(STR), "zip": Field(STR),
}
_ORDER_PAYMENT = {
    "transaction_type": Field(literal("payment", "refund")),
    "amount": Field(FLOAT),
    "payment_method_id": Field(STR),
}
_CANCEL_REASONS = {"no longer needed", "ordered by mistake"}


def _payment(kind: str, amount: Any, method_id: Any) -> dict[str, Any]:
    return build("OrderPayment", _ORDER_PAYMENT, {"transaction_type": kind, "amount": amount, "payment_method_id": method_id})


def _address(**values: Any) -> dict[str, Any]:
    return build("UserAddress", _ADDRESS, values)


def _is_gift_card(method: dict[str, Any]) -> bool:
    return method.get("source") == "gift_card"


def _index_users_by_name(data: dict[str, Any]) -> dict[tuple[str, str], list[str]]:
    index: dict[tuple[str, str], list[str]] = {}
    for user_id, user in data["users"].items():
        key = (user["name"]["first_name"].lower(), user["name"]["last_name"].lower())
        index.setdefault(key, []).append(user_id)
    return index


def _index_users_by_email(data: dict[str, Any]) -> dict[str, list[str]]:
    index: dict[str, list[str]] = {}
    for user_id, user in data["users"].items():
        index.setdefault(user["email"].lower(), []).append(user_id)
    return index


class RetailTools(Toolkit):
    """Agent tools of the retail domain (no user tools)."""

    # ---- lookups (raise tau2's texts)
    def _order(self, order_id: Any) -> dict[str, Any]:
        if order_id not in self.db["orders"]:
            raise ValueError("Order not found")
        return self.db["orders"][order_id]

    def _user(self, user_id: Any) -> dict[str, Any]:
        if user_id not in self.db["users"]:
            raise ValueError("User not found")
        return self.db["users"][user_id]

    def _product(self, product_id: Any) -> dict[str, Any]:
        if product_id not in self.db["products"]:
            raise ValueError("Product not found")
        return self.db["products"][product_id]

    def _variant(self, product_id: Any, variant_id: Any) -> dict[str, Any]:
        variants = self._product(product_id)["variants"]
        if variant_id not in variants:
            raise ValueError("Variant not found")
        return variants[variant_id]

    def _method(self, user_id: Any, method_id: Any) -> dict[str, Any]:
        methods = self._user(user_id)["payment_methods"]
        if method_id not in methods:
            raise ValueError("Payment method not found")
        return methods[method_id]

    def _own_method(self, user_id: str, method_id: str) -> dict[str, Any]:
        return self.db.own("users", user_id)["payment_methods"][method_id]

    @staticmethod
    def _check_counts(item_ids: Any, order: dict[str, Any], message: Any) -> None:
        present = [item["item_id"] for item in order["items"]]
        for item_id in item_ids:
            if item_ids.count(item_id) > present.count(item_id):
                raise ValueError(message(item_id))

    # ---- tools (in tools.json order)
    @tool("generic")
    def calculate(self, expression: str) -> str:
        return calculate(expression)

    @tool("write")
    def cancel_pending_order(self, order_id: str, reason: str) -> Any:
        current = self._order(order_id)
        if current["status"] != "pending":
            raise ValueError("Non-pending order cannot be cancelled")
        if reason not in _CANCEL_REASONS:
            raise ValueError("Invalid reason")
        refunds = []
        gift_refunds: list[tuple[str, Any]] = []
        for paid in current["payment_history"]:
            method_id = paid["payment_method_id"]
            refunds.append(_payment("refund", paid["amount"], method_id))
            user = self._user(current["user_id"])
            method = self._method(user["user_id"], method_id)
            if _is_gift_card(method):
                gift_refunds.append((method_id, paid["amount"]))
        for method_id, amount in gift_refunds:
            card = self._own_method(current["user_id"], method_id)
            card["balance"] = round(card["balance"] + amount, 2)
        order = self.db.own("orders", order_id)
        order["status"] = "cancelled"
        order["cancel_reason"] = reason
        order["payment_history"].extend(refunds)
        return Model(order)

    @tool("write")
    def exchange_delivered_order_items(
        self, order_id: str, item_ids: list[str], new_item_ids: list[str], payment_method_id: str
    ) -> Any:
        current = self._order(order_id)
        if current["status"] != "delivered":
            raise ValueError("Non-delivered order cannot be exchanged")
        self._check_counts(item_ids, current, lambda i: f"Number of {i} not found.")
        if len(item_ids) != len(new_item_ids):
            raise ValueError("The number of items to be exchanged should match.")
        diff = 0
        for item_id, new_id in zip(item_ids, new_item_ids, strict=False):
            item = next((it for it in current["items"] if it["item_id"] == item_id), None)
            if item is None:
                raise ValueError(f"Item {item_id} not found")
            variant = self._variant(item["product_id"], new_id)
            if not variant["available"]:
                raise ValueError(f"New item {new_id} not found or available")
            diff += variant["price"] - item["price"]
        diff = round(diff, 2)
        method = self._method(current["user_id"], payment_method_id)
        if _is_gift_card(method) and method["balance"] < diff:
            raise ValueError("Insufficient gift card balance to pay for the price difference")
        order = self.db.own("orders", order_id)
        order["status"] = "exchange requested"
        order["exchange_items"] = sorted(item_ids)
        order["exchange_new_items"] = sorted(new_item_ids)
        order["exchange_payment_method_id"] = payment_method_id
        order["exchange_price_difference"] = diff
        return Model(order)

    @tool("read")
    def find_user_id_by_name_zip(self, first_name: str, last_name: str, zip: str) -> str:  # noqa: A002
        users = self.db["users"]
        if isinstance(first_name, str) and isinstance(last_name, str):
            # names never change: scan only the users with this name (addresses may change)
            by_name = self.db.base_index("users_by_name", _index_users_by_name)
            candidates = [u for u in by_name.get((first_name.lower(), last_name.lower()), ()) if u in users]
            for user_id in candidates:
                if users[user_id]["address"]["zip"] == zip:
                    return user_id
            raise ValueError("User not found")
        for user_id, user in users.items():
            name = user["name"]
            if (
                name["first_name"].lower() == first_name.lower()
                and name["last_name"].lower() == last_name.lower()
                and user["address"]["zip"] == zip
            ):
                return user_id
        raise ValueError("User not found")

    @tool("read")
    def find_user_id_by_email(self, email: str) -> str:
        if isinstance(email, str):
            by_email = self.db.base_index("users_by_email", _index_users_by_email)
            for user_id in by_email.get(email.lower(), ()):
                if user_id in self.db["users"]:
                    return user_id
            raise ValueError("User not found")
        for user_id, user in self.db["users"].items():
            if user["email"].lower() == email.lower():
                return user_id
        raise ValueError("User not found")

    @tool("read")
    def get_order_details(self, order_id: str) -> Any:
        return Model(self._order(order_id))

    @tool("read")
    def get_product_details(self, product_id: str) -> Any:
        return Model(self._product(product_id))

    @tool("read")
    def get_item_details(self, item_id: str) -> Any:
        for product in self.db["products"].values():
            if item_id in product["variants"]:
                return Model(product["variants"][item_id])
        raise ValueError("Item not found")

    @tool("read")
    def get_user_details(self, user_id: str) -> Any:
        return Model(self._user(user_id))

    @tool("read")
    def list_all_product_types(self) -> str:
        names = {p["name"]: p["product_id"] for p in self.db["products"].values()}
        return json.dumps(names, sort_keys=True)

    @tool("write")
    def modify_pending_order_address(
        self, order_id: str, address1: str, address2: str, city: str, state: str, country: str, zip: str  # noqa: A002
    ) -> Any:
        current = self._order(order_id)
        if "pending" not in current["status"]:
            raise ValueError("Non-pending order cannot be modified")
        address = _address(address1=address1, address2=address2, city=city, state=state, country=country, zip=zip)
        order = self.db.own("orders", order_id)
        order["address"] = address
        return Model(order)

    @tool("write")
    def modify_pending_order_items(
        self, order_id: str, item_ids: list[str], new_item_ids: list[str], payment_method_id: str
    ) -> Any:
        current = self._order(order_id)
        if current["status"] != "pending":
            raise ValueError("Non-pending order cannot be modified")
        self._check_counts(item_ids, current, lambda i: f"{i} not found")
        if len(item_ids) != len(new_item_ids):
            raise ValueError("The number of items to be exchanged should match")
        diff = 0
        variant: dict[str, Any] | None = None
        for item_id, new_id in zip(item_ids, new_item_ids, strict=False):
            if item_id == new_id:
                raise ValueError("The new item id should be different from the old item id")
            item = next((it for it in current["items"] if it["item_id"] == item_id), None)
            if item is None:
                raise ValueError(f"Item {item_id} not found")
            variant = self._variant(item["product_id"], new_id)
            if not variant["available"]:
                raise ValueError(f"New item {new_id} not found or available")
            diff += variant["price"] - item["price"]
        method = self._method(current["user_id"], payment_method_id)
        if _is_gift_card(method) and method["balance"] < diff:
            raise ValueError("Insufficient gift card balance to pay for the new item")
        payment = _payment("payment" if diff > 0 else "refund", abs(diff), payment_method_id)
        order = self.db.own("orders", order_id)
        order["payment_history"].append(payment)
        if _is_gift_card(method):
            card = self._own_method(current["user_id"], payment_method_id)
            card["balance"] = round(card["balance"] - diff, 2)
        for item_id, new_id in zip(item_ids, new_item_ids, strict=False):
            item = next((it for it in order["items"] if it["item_id"] == item_id), None)
            if item is None:
                raise ValueError(f"Item {item_id} not found")
            assert variant is not None
            # tau2 writes the last checked variant's price and options into every changed item
            item["item_id"] = new_id
            item["price"] = variant["price"]
            item["options"] = dict(variant["options"])
        order["status"] = "pending (item modified)"
        return Model(order)

    @tool("write")
    def modify_pending_order_payment(self, order_id: str, payment_method_id: str) -> Any:
        current = self._order(order_id)
        if "pending" not in current["status"]:
            raise ValueError("Non-pending order cannot be modified")
        method = self._method(current["user_id"], payment_method_id)
        history = current["payment_history"]
        if len(history) != 1 or history[0]["transaction_type"] != "payment":
            raise ValueError("There should be exactly one payment for a pending order")
        old_id = history[0]["payment_method_id"]
        if old_id == payment_method_id:
            raise ValueError("The new payment method should be different from the current one")
        amount = history[0]["amount"]
        if _is_gift_card(method) and method["balance"] < amount:
            raise ValueError("Insufficient gift card balance to pay for the order")
        new_entries = [_payment("payment", amount, payment_method_id), _payment("refund", amount, old_id)]
        old_method = self._method(current["user_id"], old_id)
        order = self.db.own("orders", order_id)
        order["payment_history"].extend(new_entries)
        if _is_gift_card(method):
            card = self._own_method(current["user_id"], payment_method_id)
            card["balance"] = round(card["balance"] - amount, 2)
        if _is_gift_card(old_method):
            card = self._own_method(current["user_id"], old_id)
            card["balance"] = round(card["balance"] + amount, 2)
        return Model(order)

    @tool("write")
    def modify_user_address(
        self, user_id: str, address1: str, address2: str, city: str, state: str, country: str, zip: str  # noqa: A002
    ) -> Any:
        self._user(user_id)
        address = _address(address1=address1, address2=address2, city=city, state=state, country=country, zip=zip)
        user = self.db.own("users", user_id)
        user["address"] = address
        return Model(user)

    @tool("write")
    def return_delivered_order_items(self, order_id: str, item_ids: list[str], payment_method_id: str) -> Any:
        current = self._order(order_id)
        if current["status"] != "delivered":
            raise ValueError("Non-delivered order cannot be returned")
        user = self._user(current["user_id"])
        method = self._method(user["user_id"], payment_method_id)
        if not _is_gift_card(method) and payment_method_id != current["payment_history"][0]["payment_method_id"]:
            raise ValueError("Payment method should be the original payment method")
        self._check_counts(item_ids, current, lambda i: "Some item not found")
        order = self.db.own("orders", order_id)
        order["status"] = "return requested"
        order["return_items"] = sorted(item_ids)
        order["return_payment_method_id"] = payment_method_id
        return Model(order)

    @tool("generic")
    def transfer_to_human_agents(self, summary: str) -> str:
        return "Transfer successful"


# ---------------------------------------------------------------- normaliser

_ORDER_ORDER = {
    "order_id": ..., "user_id": ..., "address": ..., "items": ..., "status": ..., "fulfillments": ...,
    "payment_history": ..., "cancel_reason": None, "exchange_items": None, "exchange_new_items": None,
    "exchange_payment_method_id": None, "exchange_price_difference": None, "return_items": None,
    "return_payment_method_id": None,
}
_USER_ORDER = {"user_id": ..., "name": ..., "address": ..., "email": ..., "payment_methods": ..., "orders": ...}
_PRODUCT_ORDER = {"name": ..., "product_id": ..., "variants": ...}


def normalise_db(raw: dict[str, Any]) -> dict[str, Any]:
    """retail db.json -> canonical dict (orders get their optional fields as null)."""
    def conform_all(coll: str, order: dict[str, Any]) -> dict[str, Any]:
        records = raw.get(coll, {})
        if not isinstance(records, dict):
            raise ValueError(f"RetailDB.{coll}: expected an object of records")
        return {k: conform(v, order, f"RetailDB.{coll}.{k}") for k, v in records.items()}

    return {
        "products": conform_all("products", _PRODUCT_ORDER),
        "users": conform_all("users", _USER_ORDER),
        "orders": conform_all("orders", _ORDER_ORDER),
    }


DOMAIN = DomainSpec(
    name="retail",
    tools_cls=RetailTools,
    db_model="RetailDB",
    db_file="db.json",
    normalise_db=normalise_db,
    solo_error="Retail domain does not support solo mode",
)
