"""From selected capabilities to capability-environment specs (templates offline, LLM drafts optionally)."""

from .synthesize import SynthesisOutcome, synthesize

__all__ = ["SynthesisOutcome", "synthesize"]
