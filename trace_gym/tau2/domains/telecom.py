"""τ²-bench telecom domain: the agent's account tools, the phone/account sync, and ``DOMAIN``.

The agent side (:class:`TelecomTools`) reads and changes the carrier's records:
customers, lines, plans, bills and devices.  The user side — the phone itself — lives
in :mod:`.telecom_user`; the data layout in :mod:`.telecom_db`.  After every successful
call the engine runs :func:`sync_tools`, which carries account facts to the phone
(line active, roaming allowed, data allowance used up, payment requests) and a
payment made on the phone back to the bill.

Behaviour follows τ² 1.0.1 as recorded in the conformance corpus, including its
quirks: ``refuel_data`` ignores the line status, a new draft bill takes its id from
the environment's uuid source (``"B" + hex[:8]``), "today" is fixed at 2025-02-25.
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from ..db import clone
from ..domain_spec import DomainSpec
from ..toolkit import Model, Toolkit, tool
from .telecom_db import normalise_agent_db, normalise_user_db, tau2_view
from .telecom_user import TelecomUserTools

__all__ = ["DOMAIN", "TODAY", "TelecomTools", "TelecomUserTools", "sync_tools"]

TODAY = date(2025, 2, 25)
"""τ²'s telecom clock is frozen at this date."""

Record = dict[str, Any]


def _iso(day: date) -> str:
    return day.isoformat()


class TelecomTools(Toolkit):
    """The carrier-side tools of the telecom agent, plus task set-up and assertion functions."""

    # ------------------------------------------------------------------ lookups (raise ValueError)
    def _find(self, coll: str, key: str, value: Any, label: str) -> tuple[int, Record]:
        for i, rec in enumerate(self.db[coll]):
            if rec[key] == value:
                return i, rec
        raise ValueError(f"{label} with ID {value} not found")

    def _customer(self, customer_id: Any) -> tuple[int, Record]:
        return self._find("customers", "customer_id", customer_id, "Customer")

    def _get_line_by_id(self, line_id: Any) -> Record:
        return self._find("lines", "line_id", line_id, "Line")[1]

    def _get_plan_by_id(self, plan_id: Any) -> Record:
        return self._find("plans", "plan_id", plan_id, "Plan")[1]

    def _get_device_by_id(self, device_id: Any) -> Record:
        return self._find("devices", "device_id", device_id, "Device")[1]

    def _get_bill_by_id(self, bill_id: Any) -> Record:
        return self._find("bills", "bill_id", bill_id, "Bill")[1]

    def _get_line_by_phone(self, phone_number: Any) -> Record:
        for line in self.db["lines"]:
            if line["phone_number"] == phone_number:
                return line
        raise ValueError(f"Line with phone number {phone_number} not found")

    def _target_line(self, customer_id: Any, line_id: Any) -> tuple[int, Record]:
        """The line ``line_id`` of customer ``customer_id`` (index in ``lines`` and record)."""
        _, customer = self._customer(customer_id)
        if line_id not in customer["line_ids"]:
            raise ValueError(f"Line {line_id} not found for customer {customer_id}")
        return self._find("lines", "line_id", line_id, "Line")

    def _bills_awaiting_payment(self, customer: Record) -> list[Record]:
        bills = (self._get_bill_by_id(bid) for bid in customer["bill_ids"])
        return [b for b in bills if b["status"] == "Awaiting Payment"]

    def _own_by_id(self, coll: str, key: str, value: Any) -> Record:
        i, _ = self._find(coll, key, value, coll)
        return self.db.own(coll, i)

    # ------------------------------------------------------------------ customer lookup
    @tool("read")
    def get_customer_by_phone(self, phone_number: str) -> Model:
        for customer in self.db["customers"]:
            if customer["phone_number"] == phone_number:
                return _customer_model(customer)
            for line_id in customer["line_ids"]:
                if self._get_line_by_id(line_id)["phone_number"] == phone_number:
                    return _customer_model(customer)
        raise ValueError(f"Customer with phone number {phone_number} not found")

    @tool("read")
    def get_customer_by_id(self, customer_id: str) -> Model:
        return _customer_model(self._customer(customer_id)[1])

    @tool("read")
    def get_customer_by_name(self, full_name: str, dob: str) -> list[Model]:
        return [
            _customer_model(c)
            for c in self.db["customers"]
            if c["full_name"].lower() == full_name.lower() and c["date_of_birth"] == dob
        ]

    def get_available_plan_ids(self) -> list[str]:
        return [p["plan_id"] for p in self.db["plans"]]

    @tool("read")
    def get_details_by_id(self, id: str) -> Model:  # noqa: A002 - τ²'s parameter name
        if id.startswith("L"):
            return Model(self._get_line_by_id(id))
        if id.startswith("D"):
            return Model(tau2_view("devices", self._get_device_by_id(id)))
        if id.startswith("B"):
            return Model(self._get_bill_by_id(id))
        if id.startswith("C"):
            return _customer_model(self._customer(id)[1])
        if id.startswith("P"):
            return Model(self._get_plan_by_id(id))
        raise ValueError(f"Unknown ID format or type: {id}")

    # ------------------------------------------------------------------ line status
    @tool("write")
    def suspend_line(self, customer_id: str, line_id: str, reason: str) -> dict[str, Any]:
        i, line = self._target_line(customer_id, line_id)
        if line["status"] != "Active":
            raise ValueError("Line must be active to suspend")
        line = self.db.own("lines", i)
        line["status"] = "Suspended"
        line["suspension_start_date"] = _iso(TODAY)
        return {"message": "Line suspended successfully. $5/month holding fee will apply.", "line": Model(line)}

    @tool("write")
    def resume_line(self, customer_id: str, line_id: str) -> dict[str, Any]:
        i, line = self._target_line(customer_id, line_id)
        if line["status"] not in ("Suspended", "Pending Activation"):
            raise ValueError("Line must be suspended to resume")
        line = self.db.own("lines", i)
        line["status"] = "Active"
        line["suspension_start_date"] = None
        return {"message": "Line resumed successfully", "line": Model(line)}

    # ------------------------------------------------------------------ billing
    @tool("read")
    def get_bills_for_customer(self, customer_id: str, limit: int = 12) -> list[Model]:
        _, customer = self._customer(customer_id)
        bills = [self._get_bill_by_id(bid) for bid in customer["bill_ids"]]
        newest_first = sorted(bills, key=lambda b: b["issue_date"], reverse=True)
        return [Model(b) for b in newest_first[:limit]]

    @tool("write")
    def send_payment_request(self, customer_id: str, bill_id: str) -> str:
        _, customer = self._customer(customer_id)
        if self._bills_awaiting_payment(customer):
            raise ValueError("A bill is already awaiting payment for this customer")
        if bill_id not in customer["bill_ids"]:
            raise ValueError(f"Bill {bill_id} not found for customer {customer_id}")
        bill = self._own_by_id("bills", "bill_id", bill_id)
        bill["status"] = "Awaiting Payment"
        return f"Payment request sent to the customer for bill {bill['bill_id']}"

    def _set_bill_to_paid(self, bill_id: str) -> str:
        i, bill = self._find("bills", "bill_id", bill_id, "Bill")
        if bill["status"] != "Paid":
            # ``put`` of a fresh record: this also runs from the sync, outside any transaction.
            paid = clone(bill)
            paid["status"] = "Paid"
            self.db.put("bills", i, paid)
        return f"Bill {bill_id} set to paid"

    def _apply_one_time_charge(self, customer_id: str, amount: float, description: str) -> None:
        """Add a charge (or credit, when negative) to the customer's draft bill, creating one if needed."""
        ci, customer = self._customer(customer_id)
        draft_index = None
        for bid in customer["bill_ids"]:
            j, bill = self._find("bills", "bill_id", bid, "Bill")
            if bill["status"] == "Draft":
                draft_index = j
                break
        item = {
            "description": description,
            "amount": amount,
            "date": _iso(TODAY),
            "item_type": "Credit" if amount < 0 else "Charge",
        }
        if draft_index is not None:
            draft = self.db.own("bills", draft_index)
        else:
            start = (TODAY.replace(day=1) + timedelta(days=32)).replace(day=1)
            following = start.replace(month=start.month + 1) if start.month < 12 else start.replace(year=start.year + 1, month=1)
            draft = {
                "bill_id": f"B{self.env.new_uuid_hex()[:8]}",
                "customer_id": customer_id,
                "period_start": _iso(start),
                "period_end": _iso(following - timedelta(days=1)),
                "issue_date": _iso(start),
                "total_due": 0.0,
                "due_date": _iso(start + timedelta(days=14)),
                "line_items": [],
                "status": "Draft",
            }
            self.db.put("bills", None, draft)
            self.db.own("customers", ci)["bill_ids"].append(draft["bill_id"])
        draft["line_items"].append(item)
        draft["total_due"] += amount

    # ------------------------------------------------------------------ usage, roaming, refuelling
    @tool("read")
    def get_data_usage(self, customer_id: str, line_id: str) -> dict[str, Any]:
        _, line = self._target_line(customer_id, line_id)
        plan = self._get_plan_by_id(line["plan_id"])
        # τ²'s formula, December included (it keeps the year).
        next_month = date(TODAY.year, TODAY.month + 1 if TODAY.month < 12 else 1, 1)
        return {
            "line_id": line_id,
            "data_used_gb": line["data_used_gb"],
            "data_limit_gb": plan["data_limit_gb"],
            "data_refueling_gb": line["data_refueling_gb"],
            "cycle_end_date": next_month - timedelta(days=1),
        }

    def set_data_usage(self, customer_id: str, line_id: str, data_used_gb: float) -> str:
        i, _ = self._target_line(customer_id, line_id)
        self.db.own("lines", i)["data_used_gb"] = data_used_gb
        return f"Data usage set to {data_used_gb} GB for line {line_id}"

    def _set_roaming(self, customer_id: str, line_id: str, enabled: bool) -> str:
        i, line = self._target_line(customer_id, line_id)
        word = "enabled" if enabled else "disabled"
        if bool(line["roaming_enabled"]) == enabled:
            return f"Roaming was already {word}"
        self.db.own("lines", i)["roaming_enabled"] = enabled
        return f"Roaming {word} successfully"

    @tool("write")
    def enable_roaming(self, customer_id: str, line_id: str) -> str:
        return self._set_roaming(customer_id, line_id, True)

    @tool("write")
    def disable_roaming(self, customer_id: str, line_id: str) -> str:
        return self._set_roaming(customer_id, line_id, False)

    @tool("generic")
    def transfer_to_human_agents(self, summary: str) -> str:
        return "Transfer successful"

    @tool("write")
    def refuel_data(self, customer_id: str, line_id: str, gb_amount: float) -> dict[str, Any]:
        i, _ = self._target_line(customer_id, line_id)
        if gb_amount <= 0:
            raise ValueError("Refuel amount must be positive")
        line = self._get_line_by_id(line_id)
        plan = self._get_plan_by_id(line["plan_id"])
        price = plan["data_refueling_price_per_gb"]
        charge = gb_amount * price
        line = self.db.own("lines", i)
        line["data_refueling_gb"] += gb_amount
        self._apply_one_time_charge(customer_id, charge, f"Data refueling: {gb_amount} GB at ${price}/GB")
        return {
            "message": f"Successfully added {gb_amount} GB of data for line {line_id} for ${charge:.2f}",
            "new_data_refueling_gb": line["data_refueling_gb"],
            "charge": charge,
        }

    # ------------------------------------------------------------------ task set-up
    def suspend_line_for_overdue_bill(
        self, customer_id: str, line_id: str, new_bill_id: str, contract_ended: bool
    ) -> str:
        """Put a line in the state of a customer who did not pay last month's bill."""
        li, line = self._find("lines", "line_id", line_id, "Line")
        if line["status"] != "Active":
            raise ValueError("Line must be active to suspend for unpaid bill")
        amount = self._get_plan_by_id(line["plan_id"])["price_per_month"]
        if amount <= 0:
            raise ValueError("Amount must be positive for overdue bill")
        ci, customer = self._customer(customer_id)
        if any(self._get_bill_by_id(bid)["status"] == "Overdue" for bid in customer["bill_ids"]):
            raise ValueError("Customer already has an overdue bill")
        last_month_end = TODAY.replace(day=1) - timedelta(days=1)
        last_month_start = last_month_end.replace(day=1)
        bill = {
            "bill_id": new_bill_id,
            "customer_id": customer_id,
            "period_start": _iso(last_month_start),
            "period_end": _iso(last_month_end),
            "issue_date": _iso(last_month_start),
            "total_due": 0.0 + amount,
            "due_date": _iso(last_month_start + timedelta(days=14)),
            "line_items": [
                {
                    "description": f"Charge for line {line['line_id']}",
                    "amount": amount,
                    "date": _iso(TODAY),
                    "item_type": "Charge" if amount > 0 else "Credit",
                }
            ],
            "status": "Overdue",
        }
        self.db.put("bills", None, bill)
        self.db.own("customers", ci)["bill_ids"].append(new_bill_id)
        line = self.db.own("lines", li)
        line["status"] = "Suspended"
        line["suspension_start_date"] = _iso(TODAY)
        if contract_ended:
            line["contract_end_date"] = _iso(last_month_end)
        return f"Line {line_id} suspended for unpaid bill {new_bill_id}. Contract ended: {contract_ended}"

    # ------------------------------------------------------------------ assertions
    def assert_data_refueling_amount(self, customer_id: str, line_id: str, expected_amount: float) -> bool:
        _, line = self._target_line(customer_id, line_id)
        return abs(line["data_refueling_gb"] - expected_amount) < 1e-6

    def assert_line_status(self, customer_id: str, line_id: str, expected_status: str) -> bool:
        _, line = self._target_line(customer_id, line_id)
        return line["status"] == expected_status

    def assert_overdue_bill_exists(self, customer_id: str, overdue_bill_id: str) -> bool:
        _, customer = self._customer(customer_id)
        if overdue_bill_id not in customer["bill_ids"]:
            raise ValueError(f"Overdue bill {overdue_bill_id} not found")
        if self._get_bill_by_id(overdue_bill_id)["status"] != "Overdue":
            raise ValueError(f"Overdue bill {overdue_bill_id} is not overdue")
        return True

    def assert_no_overdue_bill(self, overdue_bill_id: str) -> bool:
        try:
            bill = self._get_bill_by_id(overdue_bill_id)
        except ValueError:
            return True
        return bill["status"] == "Paid"


def _customer_model(customer: Record) -> Model:
    return Model(tau2_view("customers", customer))


# --------------------------------------------------------------------------- sync
def sync_tools(env: Any) -> None:
    """Carry account state to the phone and phone payments to the account (τ²'s ``sync_tools``).

    Runs after every successful tool call; writes only what actually changes.
    """
    user_db = env.user_db
    if user_db is None:
        return
    surroundings = user_db["surroundings"]
    phone = surroundings["phone_number"]
    if phone is None:
        return
    tools: TelecomTools = env.tools
    line = tools._get_line_by_phone(phone)
    updates: dict[str, Any] = {
        "line_active": line["status"] == "Active",
        "roaming_allowed": bool(line["roaming_enabled"]),
    }
    plan = tools._get_plan_by_id(line["plan_id"])
    updates["mobile_data_usage_exceeded"] = line["data_used_gb"] >= plan["data_limit_gb"] + line["data_refueling_gb"]
    request = surroundings["payment_request"]
    if request is not None and request["paid"]:
        tools._set_bill_to_paid(request["bill_id"])
        request = updates["payment_request"] = None
    if request is None:
        customer = tools.get_customer_by_phone(phone).data
        awaiting = tools._bills_awaiting_payment(customer)
        if awaiting:
            bill = awaiting[0]
            updates["payment_request"] = {"bill_id": bill["bill_id"], "amount_due": float(bill["total_due"]), "paid": False}
    for key, value in updates.items():
        if surroundings[key] != value:
            user_db.put("surroundings", key, value)


DOMAIN = DomainSpec(
    name="telecom",
    tools_cls=TelecomTools,
    db_model="TelecomDB",
    db_file="db.toml",
    normalise_db=normalise_agent_db,
    user_tools_cls=TelecomUserTools,
    user_db_model="TelecomUserDB",
    user_db_file="user_db.toml",
    normalise_user_db=normalise_user_db,
    tau2_view=tau2_view,
    sync=sync_tools,
)
