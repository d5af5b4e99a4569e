"""Airline tool behaviour over a plain-dict database (same layout as τ²-bench's airline ``db.json``).

The capability environments' fallback when the project's τ²-bench engine
(:mod:`trace_gym.tau2.engine`) is not available.  Preconditions are checked before any
change; ``book_reservation`` is not implemented here (the engine has it).
"""

from __future__ import annotations

from typing import Any

from ...core.tools import ToolError

__all__ = ["AirlineBackend", "AIRPORTS", "NOW"]

NOW = "2024-05-15T15:00:00"

AIRPORTS = [
    ("SFO", "San Francisco"), ("JFK", "New York"), ("LAX", "Los Angeles"), ("ORD", "Chicago"),
    ("DFW", "Dallas"), ("DEN", "Denver"), ("SEA", "Seattle"), ("ATL", "Atlanta"), ("MIA", "Miami"),
    ("BOS", "Boston"), ("PHX", "Phoenix"), ("IAH", "Houston"), ("LAS", "Las Vegas"), ("MCO", "Orlando"),
    ("EWR", "Newark"), ("CLT", "Charlotte"), ("MSP", "Minneapolis"), ("DTW", "Detroit"),
    ("PHL", "Philadelphia"), ("LGA", "LaGuardia"),
]


class AirlineBackend:
    """Implements the airline tools; ``db`` is mutated in place."""

    domain = "airline"

    def __init__(self, db: dict[str, Any]):
        self.db = db

    def _user(self, user_id: str) -> dict[str, Any]:
        user = self.db["users"].get(user_id)
        if user is None:
            raise ToolError(f"User {user_id} not found")
        return user

    def _reservation(self, reservation_id: str) -> dict[str, Any]:
        res = self.db["reservations"].get(reservation_id)
        if res is None:
            raise ToolError(f"Reservation {reservation_id} not found")
        return res

    def _flight(self, flight_number: str) -> dict[str, Any]:
        flight = self.db["flights"].get(flight_number)
        if flight is None:
            raise ToolError(f"Flight {flight_number} not found")
        return flight

    def _instance(self, flight_number: str, date: str) -> dict[str, Any]:
        flight = self._flight(flight_number)
        if date not in flight["dates"]:
            raise ToolError(f"Flight {flight_number} not found on date {date}")
        return flight["dates"][date]

    def _direct(self, date: str, origin: str | None, destination: str | None, leave_after: str | None = None) -> list[dict[str, Any]]:
        out = []
        for f in self.db["flights"].values():
            inst = f["dates"].get(date)
            if inst is None or inst["status"] != "available":
                continue
            if origin is not None and f["origin"] != origin:
                continue
            if destination is not None and f["destination"] != destination:
                continue
            if leave_after is not None and f["scheduled_departure_time_est"] < leave_after:
                continue
            out.append({
                "flight_number": f["flight_number"], "origin": f["origin"], "destination": f["destination"],
                "status": "available", "scheduled_departure_time_est": f["scheduled_departure_time_est"],
                "scheduled_arrival_time_est": f["scheduled_arrival_time_est"],
                "date": None, "available_seats": dict(inst["available_seats"]), "prices": dict(inst["prices"]),
            })
        return out

    def _check_payment(self, user: dict[str, Any], payment_id: str, total: int) -> None:
        pm = user["payment_methods"].get(payment_id)
        if pm is None:
            raise ToolError("Payment method not found")
        if pm["source"] == "certificate":
            raise ToolError("Certificate cannot be used to update reservation")
        if pm["source"] == "gift_card" and pm["amount"] < total:
            raise ToolError("Gift card balance is not enough")

    def _charge(self, user: dict[str, Any], res: dict[str, Any], payment_id: str, total: int) -> None:
        pm = user["payment_methods"][payment_id]
        if pm["source"] == "gift_card":
            pm["amount"] -= total
        if total != 0:
            res["payment_history"].append({"payment_id": payment_id, "amount": total})

    # ----------------------------------------------------------------- read tools
    def calculate(self, expression: str) -> str:
        if not all(ch in "0123456789+-*/(). " for ch in expression):
            raise ToolError("Invalid characters in expression")
        from .arith import evaluate

        return str(round(float(evaluate(expression)), 2))

    def get_user_details(self, user_id: str) -> dict[str, Any]:
        return self._user(user_id)

    def get_reservation_details(self, reservation_id: str) -> dict[str, Any]:
        return self._reservation(reservation_id)

    def list_all_airports(self) -> list[dict[str, str]]:
        return [{"iata": code, "city": city} for code, city in AIRPORTS]

    def search_direct_flight(self, origin: str, destination: str, date: str) -> list[dict[str, Any]]:
        return self._direct(date, origin, destination)

    def search_onestop_flight(self, origin: str, destination: str, date: str) -> list[list[dict[str, Any]]]:
        pairs = []
        for first in self._direct(date, origin, None):
            first["date"] = date
            date2 = f"2024-05-{int(date[-2:]) + 1}" if "+1" in first["scheduled_arrival_time_est"] else date
            for second in self._direct(date2, first["destination"], destination, first["scheduled_arrival_time_est"]):
                second["date"] = date2
                pairs.append([first, second])
        return pairs

    def get_flight_status(self, flight_number: str, date: str) -> str:
        return self._instance(flight_number, date)["status"]

    def transfer_to_human_agents(self, summary: str) -> str:
        return "Transfer successful"

    # ----------------------------------------------------------------- write tools
    def cancel_reservation(self, reservation_id: str) -> dict[str, Any]:
        res = self._reservation(reservation_id)
        refunds = [{"payment_id": p["payment_id"], "amount": -p["amount"]} for p in res["payment_history"]]
        res["payment_history"].extend(refunds)
        res["status"] = "cancelled"
        return res

    def send_certificate(self, user_id: str, amount: int) -> str:
        user = self._user(user_id)
        for pid in ("certificate_3221322", "certificate_3221323", "certificate_3221324"):
            if pid not in user["payment_methods"]:
                user["payment_methods"][pid] = {"source": "certificate", "id": pid, "amount": amount}
                return f"Certificate {pid} added to user {user_id} with amount {amount}."
        raise ToolError("Too many certificates")

    def update_reservation_baggages(self, reservation_id: str, total_baggages: int, nonfree_baggages: int, payment_id: str) -> dict[str, Any]:
        res = self._reservation(reservation_id)
        user = self._user(res["user_id"])
        total = 50 * max(0, nonfree_baggages - res["nonfree_baggages"])
        self._check_payment(user, payment_id, total)
        self._charge(user, res, payment_id, total)
        res["total_baggages"] = total_baggages
        res["nonfree_baggages"] = nonfree_baggages
        return res

    def update_reservation_flights(self, reservation_id: str, cabin: str, flights: list[dict[str, Any]], payment_id: str) -> dict[str, Any]:
        res = self._reservation(reservation_id)
        user = self._user(res["user_id"])
        n = len(res["passengers"])
        total = 0
        new_flights = []
        for info in flights:
            if not isinstance(info, dict) or "flight_number" not in info or "date" not in info:
                raise ToolError("each flight needs flight_number and date")
            flight = self._flight(info["flight_number"])
            kept = next((f for f in res["flights"] if f["flight_number"] == flight["flight_number"]
                         and f["date"] == info["date"] and cabin == res["cabin"]), None)
            if kept is not None:
                total += kept["price"] * n
                new_flights.append(kept)
                continue
            inst = self._instance(flight["flight_number"], info["date"])
            if inst["status"] != "available":
                raise ToolError(f"Flight {flight['flight_number']} not available on date {info['date']}")
            if inst["available_seats"][cabin] < n:
                raise ToolError(f"Not enough seats on flight {flight['flight_number']}")
            price = inst["prices"][cabin]
            total += price * n
            new_flights.append({"flight_number": flight["flight_number"], "date": info["date"], "price": price,
                                "origin": flight["origin"], "destination": flight["destination"]})
        total -= sum(f["price"] for f in res["flights"]) * n
        self._check_payment(user, payment_id, total)
        self._charge(user, res, payment_id, total)
        res["flights"] = new_flights
        res["cabin"] = cabin
        return res

    def update_reservation_passengers(self, reservation_id: str, passengers: list[dict[str, Any]]) -> dict[str, Any]:
        res = self._reservation(reservation_id)
        if len(passengers) != len(res["passengers"]):
            raise ToolError("Number of passengers does not match")
        res["passengers"] = [dict(p) for p in passengers]
        return res
