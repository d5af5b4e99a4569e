"""τ²-bench ``airline`` domain: flights, users with payment methods, reservations.

Behaviour follows tau2 1.0.1, including its quirks: the fixed clock
(``2024-05-15T15:00:00``), fixed new ids (``HATHAT``.., ``certificate_3221322``..),
cancellation that refunds again when repeated (doubling the payment history; we
refuse once it would exceed 4096 entries, i.e. after about 12 repeats) and never releases seats, flight
changes that do not touch seats, unvalidated baggage/passenger assignments and the
unpadded next-day date of one-stop searches (``2024-05-2``).
"""

from __future__ import annotations

from typing import Any

from trace_gym.tau2.db import clone
from trace_gym.tau2.domain_spec import DomainSpec
from trace_gym.tau2.toolkit import Model, Toolkit, tool
from trace_gym.tau2.validation import FLOAT, INT, STR, Field, build, literal, model_list, optional

from ._common import Obj, calculate, field_of
from ._records import conform

_NOW = "2024-05-15T15:00:00"
_NEW_RESERVATION_IDS = ("HATHAT", "HATHAU", "HATHAV")
_NEW_PAYMENT_IDS = (3221322, 3221323, 3221324)
_MAX_PAYMENT_HISTORY = 4096  # our guard (not in tau2) against the exponential growth of repeated cancellations

_FLIGHT_INFO = {"flight_number": Field(STR), "date": Field(STR)}
_PASSENGER = {"first_name": Field(STR), "last_name": Field(STR), "dob": Field(STR)}
_PAYMENT = {"payment_id": Field(STR), "amount": Field(INT)}
_RES_FLIGHT = {
    "flight_number": Field(STR), "origin": Field(STR), "destination": Field(STR), "date": Field(STR), "price": Field(INT),
}
_CABINS = ("business", "economy", "basic_economy")
_RESERVATION = {
    "reservation_id": Field(STR),
    "user_id": Field(STR),
    "origin": Field(STR),
    "destination": Field(STR),
    "flight_type": Field(literal("round_trip", "one_way")),
    "cabin": Field(literal(*_CABINS)),
    "flights": Field(model_list("ReservationFlight", _RES_FLIGHT)),
    "passengers": Field(model_list("Passenger", _PASSENGER)),
    "payment_history": Field(model_list("Payment", _PAYMENT)),
    "created_at": Field(STR),
    "total_baggages": Field(INT),
    "nonfree_baggages": Field(INT),
    "insurance": Field(literal("yes", "no")),
    "status": Field(optional(literal("cancelled")), default=None),
}
_CERTIFICATE = {"source": Field(literal("certificate")), "id": Field(STR), "amount": Field(FLOAT)}

AIRPORTS = (  # (IATA code, city): what list_all_airports returns; synthetic airline databases use it too
    ("SFO", "San Francisco"), ("JFK", "New York"), ("LAX", "Los Angeles"), ("ORD", "Chicago"),
    ("DFW", "Dallas"), ("DEN", "Denver"), ("SEA", "Seattle"), ("ATL", "Atlanta"), ("MIA", "Miami"),
    ("BOS", "Boston"), ("PHX", "Phoenix"), ("IAH", "Houston"), ("LAS", "Las Vegas"), ("MCO", "Orlando"),
    ("EWR", "Newark"), ("CLT", "Charlotte"), ("MSP", "Minneapolis"), ("DTW", "Detroit"),
    ("PHL", "Philadelphia"), ("LGA", "LaGuardia"),
)


def _model(name: str, fields: dict[str, Field], values: dict[str, Any]) -> Obj:
    return Obj(build(name, fields, values))


def _models_if_all_dicts(items: Any, name: str, fields: dict[str, Field]) -> Any:
    """tau2 converts a list argument to models only when every element is a dict."""
    if all(isinstance(x, dict) for x in items):
        return [_model(name, fields, x) for x in items]
    return items


def _index_by_origin(data: dict[str, Any]) -> dict[str, list[str]]:
    index: dict[str, list[str]] = {}
    for number, flight in data["flights"].items():
        index.setdefault(flight["origin"], []).append(number)
    return index


class AirlineTools(Toolkit):
    """Agent tools of the airline domain (no user tools)."""

    # ---- lookups (raise tau2's texts)
    def _user(self, user_id: Any) -> dict[str, Any]:
        if user_id not in self.db["users"]:
            raise ValueError(f"User {user_id} not found")
        return self.db["users"][user_id]

    def _reservation(self, reservation_id: Any) -> dict[str, Any]:
        if reservation_id not in self.db["reservations"]:
            raise ValueError(f"Reservation {reservation_id} not found")
        return self.db["reservations"][reservation_id]

    def _flight(self, flight_number: Any) -> dict[str, Any]:
        if flight_number not in self.db["flights"]:
            raise ValueError(f"Flight {flight_number} not found")
        return self.db["flights"][flight_number]

    def _flight_on(self, flight_number: Any, date: Any) -> dict[str, Any]:
        dates = self._flight(flight_number)["dates"]
        if date not in dates:
            raise ValueError(f"Flight {flight_number} not found on date {date}")
        return dates[date]

    def _candidates(self, origin: Any) -> Any:
        """Flights to scan, in DB order: those leaving ``origin`` (routes never change), or all."""
        if isinstance(origin, str):
            by_origin = self.db.base_index("flights_by_origin", _index_by_origin)
            flights = self.db["flights"]
            return [flights[n] for n in by_origin.get(origin, ()) if n in flights]
        return self.db["flights"].values()

    def _direct(self, date: Any, origin: Any = None, destination: Any = None, leave_after: Any = None) -> list[dict[str, Any]]:
        found = []
        for f in self._candidates(origin):
            if origin is not None and f["origin"] != origin:
                continue
            if destination is not None and f["destination"] != destination:
                continue
            if date not in f["dates"]:
                continue
            day = f["dates"][date]
            if day["status"] != "available":
                continue
            if leave_after is not None and not (f["scheduled_departure_time_est"] >= leave_after):
                continue
            found.append({
                "flight_number": f["flight_number"],
                "origin": f["origin"],
                "destination": f["destination"],
                "status": "available",
                "scheduled_departure_time_est": f["scheduled_departure_time_est"],
                "scheduled_arrival_time_est": f["scheduled_arrival_time_est"],
                "date": None,
                "available_seats": dict(day["available_seats"]),
                "prices": dict(day["prices"]),
            })
        return found

    def _pay_for_update(self, user_id: str, payment_id: Any, total_price: Any) -> dict[str, Any] | None:
        """Check and charge a change fee; returns the payment record (``None`` when free)."""
        methods = self.db["users"][user_id]["payment_methods"]
        if payment_id not in methods:
            raise ValueError("Payment method not found")
        method = methods[payment_id]
        if method["source"] == "certificate":
            raise ValueError("Certificate cannot be used to update reservation")
        if method["source"] == "gift_card" and method["amount"] < total_price:
            raise ValueError("Gift card balance is not enough")
        if method["source"] == "gift_card":
            owned = self.db.own("users", user_id)["payment_methods"][payment_id]
            owned["amount"] -= total_price
        if total_price != 0:
            return build("Payment", _PAYMENT, {"payment_id": payment_id, "amount": total_price})
        return None

    # ---- tools (in tools.json order)
    @tool("write")
    def book_reservation(
        self,
        user_id: str,
        origin: str,
        destination: str,
        flight_type: str,
        cabin: str,
        flights: list[Any],
        passengers: list[Any],
        payment_methods: list[Any],
        total_baggages: int,
        nonfree_baggages: int,
        insurance: str,
    ) -> Any:
        flights = _models_if_all_dicts(flights, "FlightInfo", _FLIGHT_INFO)
        passengers = _models_if_all_dicts(passengers, "Passenger", _PASSENGER)
        payment_methods = _models_if_all_dicts(payment_methods, "Payment", _PAYMENT)
        user = self._user(user_id)
        reservation_id = next((r for r in _NEW_RESERVATION_IDS if r not in self.db["reservations"]), None)
        if reservation_id is None:
            raise ValueError("Too many reservations")
        reservation = build("Reservation", _RESERVATION, {
            "reservation_id": reservation_id, "user_id": user_id, "origin": origin, "destination": destination,
            "flight_type": flight_type, "cabin": cabin, "flights": [], "passengers": passengers,
            "payment_history": payment_methods, "created_at": _NOW, "total_baggages": total_baggages,
            "nonfree_baggages": nonfree_baggages, "insurance": insurance,
        })
        total_price = 0
        seat_updates: list[tuple[str, str]] = []
        for info in flights:
            number = field_of(info, "flight_number")
            flight = self._flight(number)
            day = self._flight_on(number, field_of(info, "date"))
            if day["status"] != "available":
                raise ValueError(f"Flight {number} not available on date {field_of(info, 'date')}")
            if day["available_seats"][cabin] < len(passengers):
                raise ValueError(f"Not enough seats on flight {number}")
            price = day["prices"][cabin]
            reservation["flights"].append(build("ReservationFlight", _RES_FLIGHT, {
                "flight_number": number, "origin": flight["origin"], "destination": flight["destination"],
                "date": field_of(info, "date"), "price": price,
            }))
            seat_updates.append((number, field_of(info, "date")))
            total_price += price * len(passengers)
        if insurance == "yes":
            total_price += 30 * len(passengers)
        total_price += 50 * nonfree_baggages
        for pm in payment_methods:
            pid, amount = field_of(pm, "payment_id"), field_of(pm, "amount")
            if pid not in user["payment_methods"]:
                raise ValueError(f"Payment method {pid} not found")
            method = user["payment_methods"][pid]
            if method["source"] in ("gift_card", "certificate") and method["amount"] < amount:
                raise ValueError(f"Not enough balance in payment method {pid}")
        total_payment = sum(field_of(pm, "amount") for pm in payment_methods)
        if total_payment != total_price:
            raise ValueError(
                f"Payment amount does not add up, total price is {total_price}, but paid {total_payment}"
            )
        # all checks passed: charge, take the seats, store
        owned_user = self.db.own("users", user_id)
        for pm in payment_methods:
            pid, amount = field_of(pm, "payment_id"), field_of(pm, "amount")
            method = owned_user["payment_methods"][pid]
            if method["source"] == "gift_card":
                method["amount"] -= amount
            elif method["source"] == "certificate":
                owned_user["payment_methods"].pop(pid)
        for number, day_key in seat_updates:
            self.db.own("flights", number)["dates"][day_key]["available_seats"][cabin] -= len(passengers)
        self.db.put("reservations", reservation_id, reservation)
        owned_user["reservations"].append(reservation_id)
        return Model(reservation)

    @tool("generic")
    def calculate(self, expression: str) -> str:
        return calculate(expression)

    @tool("write")
    def cancel_reservation(self, reservation_id: str) -> Any:
        current = self._reservation(reservation_id)
        if len(current["payment_history"]) > _MAX_PAYMENT_HISTORY // 2:
            # tau2 refunds every entry again on each repeat, doubling the history; stop before memory runs out
            raise ValueError("Payment history too long: the reservation has been cancelled too many times")
        reservation = self.db.own("reservations", reservation_id)
        refunds = [
            build("Payment", _PAYMENT, {"payment_id": p["payment_id"], "amount": -p["amount"]})
            for p in reservation["payment_history"]
        ]
        reservation["payment_history"].extend(refunds)
        reservation["status"] = "cancelled"
        return Model(reservation)

    @tool("read")
    def get_reservation_details(self, reservation_id: str) -> Any:
        return Model(self._reservation(reservation_id))

    @tool("read")
    def get_user_details(self, user_id: str) -> Any:
        return Model(self._user(user_id))

    @tool("read")
    def list_all_airports(self) -> Any:
        return [Model({"iata": code, "city": city}) for code, city in AIRPORTS]

    @tool("read")
    def search_direct_flight(self, origin: str, destination: str, date: str) -> Any:
        return [Model(f) for f in self._direct(date=date, origin=origin, destination=destination)]

    @tool("read")
    def search_onestop_flight(self, origin: str, destination: str, date: str) -> Any:
        pairs = []
        for first in self._direct(date=date, origin=origin):
            first["date"] = date
            if "+1" in first["scheduled_arrival_time_est"]:
                date2 = f"2024-05-{int(date[-2:]) + 1}"  # unpadded, as tau2 writes it
            else:
                date2 = date
            for second in self._direct(
                date=date2, origin=first["destination"], destination=destination,
                leave_after=first["scheduled_arrival_time_est"],
            ):
                second["date"] = date2
                pairs.append([Model(first), Model(second)])
        return pairs

    @tool("write")
    def send_certificate(self, user_id: str, amount: int) -> str:
        user = self._user(user_id)
        for n in _NEW_PAYMENT_IDS:
            payment_id = f"certificate_{n}"
            if payment_id not in user["payment_methods"]:
                cert = build("Certificate", _CERTIFICATE, {"id": payment_id, "amount": amount, "source": "certificate"})
                self.db.own("users", user_id)["payment_methods"][payment_id] = cert
                return f"Certificate {payment_id} added to user {user_id} with amount {amount}."
        raise ValueError("Too many certificates")

    @tool("generic")
    def transfer_to_human_agents(self, summary: str) -> str:
        return "Transfer successful"

    @tool("write")
    def update_reservation_baggages(
        self, reservation_id: str, total_baggages: int, nonfree_baggages: int, payment_id: str
    ) -> Any:
        current = self._reservation(reservation_id)
        user_id = current["user_id"]
        self._user(user_id)
        total_price = 50 * max(0, nonfree_baggages - current["nonfree_baggages"])
        payment = self._pay_for_update(user_id, payment_id, total_price)
        reservation = self.db.own("reservations", reservation_id)
        if payment is not None:
            reservation["payment_history"].append(payment)
        reservation["total_baggages"] = total_baggages  # unvalidated assignment, as in tau2
        reservation["nonfree_baggages"] = nonfree_baggages
        return Model(reservation)

    @tool("write")
    def update_reservation_flights(self, reservation_id: str, cabin: str, flights: list[Any], payment_id: str) -> Any:
        flights = _models_if_all_dicts(flights, "FlightInfo", _FLIGHT_INFO)
        current = self._reservation(reservation_id)
        user_id = current["user_id"]
        self._user(user_id)
        n_pax = len(current["passengers"])
        total_price = 0
        new_flights = []
        for info in flights:
            number, day_key = field_of(info, "flight_number"), field_of(info, "date")
            kept = next(
                (f for f in current["flights"]
                 if f["flight_number"] == number and f["date"] == day_key and cabin == current["cabin"]),
                None,
            )
            if kept is not None:
                total_price += kept["price"] * n_pax
                new_flights.append(kept)
                continue
            flight = self._flight(number)
            day = self._flight_on(number, day_key)
            if day["status"] != "available":
                raise ValueError(f"Flight {number} not available on date {day_key}")
            if day["available_seats"][cabin] < n_pax:
                raise ValueError(f"Not enough seats on flight {number}")
            leg = build("ReservationFlight", _RES_FLIGHT, {
                "flight_number": number, "date": day_key, "price": day["prices"][cabin],
                "origin": flight["origin"], "destination": flight["destination"],
            })
            total_price += leg["price"] * n_pax
            new_flights.append(leg)
        total_price -= sum(f["price"] for f in current["flights"]) * n_pax
        payment = self._pay_for_update(user_id, payment_id, total_price)
        reservation = self.db.own("reservations", reservation_id)
        if payment is not None:
            reservation["payment_history"].append(payment)
        reservation["flights"] = [dict(f) for f in new_flights]
        reservation["cabin"] = cabin  # unvalidated assignment, as in tau2
        return Model(reservation)

    @tool("write")
    def update_reservation_passengers(self, reservation_id: str, passengers: list[Any]) -> Any:
        passengers = _models_if_all_dicts(passengers, "Passenger", _PASSENGER)
        current = self._reservation(reservation_id)
        if len(passengers) != len(current["passengers"]):
            raise ValueError("Number of passengers does not match")
        reservation = self.db.own("reservations", reservation_id)
        reservation["passengers"] = clone(passengers)  # stored as given when not all dicts, as in tau2
        return Model(reservation)

    @tool("read")
    def get_flight_status(self, flight_number: str, date: str) -> Any:
        return self._flight_on(flight_number, date)["status"]


# ---------------------------------------------------------------- normaliser

_FLIGHT_ORDER = {
    "flight_number": ..., "origin": ..., "destination": ...,
    "scheduled_departure_time_est": ..., "scheduled_arrival_time_est": ..., "dates": ...,
}
_RES_FLIGHT_ORDER = {"flight_number": ..., "origin": ..., "destination": ..., "date": ..., "price": ...}
_RESERVATION_ORDER = {name: (None if name == "status" else ...) for name in _RESERVATION}
_USER_ORDER = {
    "user_id": ..., "name": ..., "address": ..., "email": ..., "dob": ..., "payment_methods": ...,
    "saved_passengers": ..., "membership": ..., "reservations": ...,
}


def normalise_db(raw: dict[str, Any]) -> dict[str, Any]:
    """airline db.json -> canonical dict (model field order; ``status`` defaults to null)."""
    flights = {k: conform(v, _FLIGHT_ORDER, f"FlightDB.flights.{k}") for k, v in raw.get("flights", {}).items()}
    reservations = {}
    for k, v in raw.get("reservations", {}).items():
        rec = conform(v, _RESERVATION_ORDER, f"FlightDB.reservations.{k}")
        rec["flights"] = [
            conform(f, _RES_FLIGHT_ORDER, f"FlightDB.reservations.{k}.flights") if isinstance(f, dict) else f
            for f in rec["flights"]
        ]
        reservations[k] = rec
    users = {k: conform(v, _USER_ORDER, f"FlightDB.users.{k}") for k, v in raw.get("users", {}).items()}
    return {"flights": flights, "users": users, "reservations": reservations}


DOMAIN = DomainSpec(
    name="airline",
    tools_cls=AirlineTools,
    db_model="FlightDB",
    db_file="db.json",
    normalise_db=normalise_db,
    solo_error="Airline domain does not support solo mode",
)
