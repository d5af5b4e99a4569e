"""Labelers: assign NA / PRESENT / LACKING to every (trajectory, capability) pair."""

from .base import Labeler, LabelingItem
from .offline import GoldLabeler

__all__ = ["GoldLabeler", "Labeler", "LabelingItem"]
