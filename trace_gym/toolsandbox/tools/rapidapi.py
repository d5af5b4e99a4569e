"""The five RapidAPI web tools, answered offline.

Upstream calls live web services; here :class:`KnowledgeBase` answers from the offline
model in ``tools.json`` (``rapidapi.knowledge_base``), with the recorded answers of the
corpus (``canned_responses_by_scenario``) taking precedence for the exact calls they
record.  Every tool needs wifi, as upstream's do.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..world import World
from .common import current_location, get_bool, latitude_range, longitude_range, require_wifi

__all__ = [
    "KnowledgeBase", "load_knowledge_base", "search_lat_lon", "search_location_around_lat_lon",
    "search_weather_around_lat_lon", "search_stock", "convert_currency",
]

# ISO 4217 codes (active), used to reject unknown currency codes as upstream does.
_ISO4217 = frozenset("""
AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB BRL BSD BTN BWP BYN BZD CAD CDF CHF
CLP CNY COP CRC CUP CVE CZK DJF DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP GEL GHS GIP GMD GNF GTQ GYD HKD HNL HTG
HUF IDR ILS INR IQD IRR ISK JMD JOD JPY KES KGS KHR KMF KPW KRW KWD KYD KZT LAK LBP LKR LRD LSL LYD MAD MDL MGA
MKD MMK MNT MOP MRU MUR MVR MWK MXN MYR MZN NAD NGN NIO NOK NPR NZD OMR PAB PEN PGK PHP PKR PLN PYG QAR RON RSD
RUB RWF SAR SBD SCR SDG SEK SGD SHP SLE SLL SOS SRD SSP STN SVC SYP SZL THB TJS TMT TND TOP TRY TTD TWD TZS UAH
UGX USD UYU UZS VES VND VUV WST XAF XCD XOF XPF YER ZAR ZMW ZWL
""".split())

_TIMEZONES = {"California": "America/Los_Angeles", "Arizona": "America/Phoenix"}


_MISSING: Any = object()


def _canned_key(tool: str, arguments: dict[str, Any]) -> str:
    return json.dumps([tool, arguments], sort_keys=True)


@dataclass
class KnowledgeBase:
    """The offline model of the RapidAPI services (``tools.json`` → ``rapidapi.knowledge_base``).

    ``canned`` holds the recorded answers (``canned_responses_by_scenario``), keyed by tool
    and bound arguments; they take precedence over the model, which answers every other call.
    """

    data: dict[str, Any]
    canned: dict[str, Any] = field(default_factory=dict)

    def recorded(self, tool: str, arguments: dict[str, Any]) -> Any:
        """The recorded answer to this exact call, or ``_MISSING``."""
        value = self.canned.get(_canned_key(tool, arguments), _MISSING)
        return value if value is _MISSING else json.loads(json.dumps(value))

    @property
    def places(self) -> dict[str, dict[str, Any]]:
        return self.data["places"]

    def reverse_geocode(self, lat: float, lon: float) -> str | None:
        tol = self.data["reverse_geocode_tolerance_deg"]
        for place in self.places.values():
            if abs(place["latitude"] - lat) <= tol and abs(place["longitude"] - lon) <= tol:
                return place["reverse_geocode_address"]
        return None

    def search_places(self, query: str) -> list[dict[str, Any]]:
        q = query.lower()
        for rule in self.data["location_query_rules"]:
            if all(k in q for k in rule["all_keywords"]):
                out = []
                for key in rule["places"]:
                    p = self.places[key]
                    item = {k: p[k] for k in ("name", "full_address", "type", "latitude", "longitude")}
                    for extra in ("phone_number", "website"):
                        if p.get(extra) is not None:
                            item[extra] = p[extra]
                    out.append(item)
                return out
        return []

    def weather(self, lat: float, lon: float, days: int) -> dict[str, Any] | None:
        tol = self.data["weather_tolerance_deg"]
        best = None
        for key, station in self.data["weather"].items():
            p = self.places[key]
            d = max(abs(p["latitude"] - lat), abs(p["longitude"] - lon))
            if d <= tol and (best is None or d < best[0]):
                best = (d, p, station)
        if best is None:
            return None
        _, p, station = best
        if days >= len(station["forecast"]):
            return None
        day = station["forecast"][days]
        out: dict[str, Any] = {
            "condition": {"text": day["condition"]},
            "daily_chance_of_rain": 0,
            "sunrise": "05:47 AM",
            "sunset": "08:24 PM",
            "name": p["city"],
            "region": p["region"],
            "country": "United States of America",
            "lat": round(p["latitude"], 2),
            "lon": round(p["longitude"], 2),
            "tz_id": _TIMEZONES.get(p["region"], "America/Los_Angeles"),
            "temperature_unit": "Celsius",
            "distance_unit": "Kilometer",
        }
        if days == 0:
            cur = station["current"]
            out["condition"] = {"text": cur["condition"]}
            out["humidity"] = cur["humidity"]
            out["current_temperature"] = cur["temp_c"]
            out["perceived_temperature"] = cur["feelslike_c"]
            out["visibility_distance"] = cur["vis_km"]
            out["wind_speed"] = cur["wind_kph"]
        out["max_temperature"] = day["maxtemp_c"]
        out["min_temperature"] = day["mintemp_c"]
        out["average_temperature"] = day["avgtemp_c"]
        out["max_wind_speed"] = 20.2
        out["average_visibility_distance"] = 10.0
        if days == 0:
            out["barometric_pressure"] = station["current"]["pressure_mb"]
        out["average_humidity"] = 45
        return out

    def stock(self, query: str) -> dict[str, Any] | None:
        q = query.lower()
        for s in self.data["stocks"]:
            if any(k in q for k in s["keywords"]):
                info = dict(s["raw"])
                info["symbol"] = info["symbol"].split(":")[0]
                return info
        return None

    def convert(self, amount: float, src: str, dst: str) -> float:
        rates = self.data["currency_per_usd"]
        src, dst = src.upper(), dst.upper()
        if src not in rates or dst not in rates:
            raise RuntimeError("Conversion failed")
        return float(amount / rates[src] * rates[dst])


def load_knowledge_base(tools_json: dict[str, Any]) -> KnowledgeBase:
    rapid = tools_json["rapidapi"]
    canned = {
        _canned_key(c["tool_name"], c["arguments"]): c["result"]
        for calls in (rapid.get("canned_responses_by_scenario") or {}).values()
        for c in calls
    }
    return KnowledgeBase(rapid["knowledge_base"], canned)


def _current_lat_lon(world: World, latitude: Any, longitude: Any) -> tuple[float, float]:
    latitude_range(latitude, "latitude")
    longitude_range(longitude, "longitude")
    if (latitude is None) ^ (longitude is None):
        raise ValueError("Latitude and Longitude must be either both provided, or both not provided")
    if latitude is None and longitude is None:
        if not get_bool(world, "location_service"):
            raise PermissionError("Location service is not enabled.")
        loc = current_location(world)
        latitude, longitude = loc["latitude"], loc["longitude"]
    return latitude, longitude


def search_lat_lon(world: World, kb: KnowledgeBase, latitude: float, longitude: float) -> str | None:
    latitude_range(latitude, "latitude")
    longitude_range(longitude, "longitude")
    require_wifi(world)
    hit = kb.recorded("search_lat_lon", {"latitude": latitude, "longitude": longitude})
    return kb.reverse_geocode(latitude, longitude) if hit is _MISSING else hit


def search_location_around_lat_lon(
    world: World, kb: KnowledgeBase, location: str, latitude: Any = None, longitude: Any = None
) -> list[dict[str, Any]]:
    asked = {"location": location, "latitude": latitude, "longitude": longitude}
    latitude, longitude = _current_lat_lon(world, latitude, longitude)
    require_wifi(world)
    hit = kb.recorded("search_location_around_lat_lon", asked)
    return kb.search_places(location) if hit is _MISSING else hit


def search_weather_around_lat_lon(
    world: World, kb: KnowledgeBase, days: int = 0, latitude: Any = None, longitude: Any = None
) -> dict[str, Any] | None:
    asked = {"days": days, "latitude": latitude, "longitude": longitude}
    latitude, longitude = _current_lat_lon(world, latitude, longitude)
    if days < 0 or not isinstance(days, int):
        raise ValueError(f"Days must be positive integer, found {days=}.")
    require_wifi(world)
    hit = kb.recorded("search_weather_around_lat_lon", asked)
    return kb.weather(latitude, longitude, days) if hit is _MISSING else hit


def search_stock(world: World, kb: KnowledgeBase, query: str) -> dict[str, Any] | None:
    require_wifi(world)
    hit = kb.recorded("search_stock", {"query": query})
    return kb.stock(query) if hit is _MISSING else hit


def convert_currency(world: World, kb: KnowledgeBase, amount: float, from_currency_code: str, to_currency_code: str) -> float:
    for code in (from_currency_code, to_currency_code):
        if code.upper() not in _ISO4217:
            raise ValueError(f"{code} is not a known 3 letter ISO 4217 currency code")
    require_wifi(world)
    hit = kb.recorded("convert_currency", {"amount": amount, "from_currency_code": from_currency_code,
                                           "to_currency_code": to_currency_code})
    return kb.convert(amount, from_currency_code, to_currency_code) if hit is _MISSING else hit
