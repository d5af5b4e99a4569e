"""From failures to capabilities: labeling trajectories and selecting the capabilities that explain failures."""

from .aggregate import AggregationResult, CapabilityRunStats, Thresholds, aggregate, run_stats
from .labels import Capability, Label, LabelRun, LabelValue

__all__ = [
    "AggregationResult", "Capability", "CapabilityRunStats", "Label", "LabelRun", "LabelValue", "Thresholds",
    "aggregate", "run_stats",
]
