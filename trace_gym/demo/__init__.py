"""``trace-gym demo``: the whole TRACE loop end to end, offline on a CPU.

A front-end over :mod:`trace_gym.pipeline`: (format warm start, when on) → base rollouts → analysis → synthesis and
calibration of capability envs → GRPO+LoRA adapters → router → before/after evaluation on
held-out tasks → summary.  On ToolSandbox (the default target) the model's own successes
and failures drive the loop and the evaluation is graded per category beside the refusal
floor; on a τ²-bench target a deliberately flawed scripted agent supplies the successes
and failures a small model cannot.
:mod:`trace_gym.demo.stages` says what the demo adds (its agents, sizes and tables).
"""

from .config import DemoConfig
from .flawed import VARIANTS, flawed_policy, flawed_script
from .runner import run_demo, verdict

__all__ = ["DemoConfig", "run_demo", "verdict", "VARIANTS", "flawed_script", "flawed_policy"]
