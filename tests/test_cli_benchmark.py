"""benchmarks/core_speed.py runs and reports positive rates."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "core_speed.py"


def test_core_speed_benchmark_runs():
    run = subprocess.run([sys.executable, str(SCRIPT), "--seconds", "0.05", "--json"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    res = json.loads(run.stdout)
    for key in ("parse_action_per_s", "step_tool_call_per_s", "step_python_call_per_s", "step_message_per_s", "step_malformed_per_s"):
        assert res[key] > 0
