"""Seeded synthetic databases with the same layout as the τ²-bench domain databases."""

from __future__ import annotations

from .airline import generate_airline_db
from .retail import generate_retail_db
from .telecom import generate_telecom_world

__all__ = ["generate_airline_db", "generate_retail_db", "generate_telecom_world", "GENERATORS"]

GENERATORS = {"retail": generate_retail_db, "airline": generate_airline_db, "telecom": generate_telecom_world}
