"""Routing each conversation to the right capability adapter, or to none."""

from .base import NO_ADAPTER, Router, first_user_message, tool_names
from .index import RouterIndex
from .retrieval import RetrievalRouter

__all__ = ["NO_ADAPTER", "RetrievalRouter", "Router", "RouterIndex", "first_user_message", "tool_names"]
