"""What the adapter-training tests share: a saved adapter's weights, and the capability env they train on."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

STATE_DEPENDENCY_ENV = {"capability": "ts-state-dependency", "env_id": "trace/cap-ts-state-dependency-v0",
                        "spec": str(ROOT / "envs" / "cap-ts-state-dependency.yaml")}
"""A pipeline stage's description of the ToolSandbox state-dependency capability env (small, fast episodes)."""


def adapter_weights(folder: str | Path) -> dict:
    """The tensors of the PEFT adapter saved in ``folder`` (needs ``safetensors``)."""
    from safetensors.torch import load_file

    return load_file(str(Path(folder) / "adapter_model.safetensors"))
