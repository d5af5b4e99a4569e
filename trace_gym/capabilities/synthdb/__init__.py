"""Seeded synthetic databases with the same layout as the τ²-bench domain databases."""

from __future__ import annotations

from .airline import generate_airline_db
from .retail import generate_retail_db

__all__ = ["generate_airline_db", "generate_retail_db", "GENERATORS"]

GENERATORS = {"retail": generate_retail_db, "airline": generate_airline_db}
