"""``trace-gym demo``: the whole TRACE loop end to end, offline on a CPU.

Base rollouts (the model plus a deliberately flawed scripted agent) → analysis →
synthesis and calibration of capability envs → GRPO+LoRA adapters → router →
before/after evaluation → summary.  See :mod:`trace_gym.demo.stages` for each stage.
"""

from .config import DemoConfig
from .flawed import VARIANTS, flawed_policy, flawed_script
from .runner import run_demo, verdict

__all__ = ["DemoConfig", "run_demo", "verdict", "VARIANTS", "flawed_script", "flawed_policy"]
