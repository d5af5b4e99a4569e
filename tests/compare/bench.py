"""``benchmarks/trace_vs_baselines.py`` loaded as a module (it is a script, not a package member) and its presets."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "trace_vs_baselines.py"


@functools.cache
def benchmark_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("trace_vs_baselines", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def preset(name: str) -> dict[str, Any]:
    """A copy of one of the script's presets."""
    return dict(benchmark_script().PRESETS[name])
