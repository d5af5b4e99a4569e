"""The conformance corpora: outputs of the real upstream code, recorded once, that the engines replay.

They live in the development data beside the checkout (``../shared/tau2/conformance`` and
``../shared/toolsandbox/conformance``); they are not shipped with the package and ``trace-gym data
fetch`` cannot rebuild them.  A test that replays one skips, naming the corpus, where it is absent.
Every lookup of a corpus goes through this module.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from trace_gym.datadirs import tau2_data_dir, toolsandbox_data_dir

_WHY = "not shipped, not rebuilt by `trace-gym data fetch`"
TAU2_MISSING = f"needs the τ²-bench conformance corpus (../shared/tau2/conformance: {_WHY})"
TOOLSANDBOX_MISSING = f"needs the ToolSandbox conformance corpus (../shared/toolsandbox/conformance: {_WHY})"


def tau2_corpus_dir() -> Path | None:
    """The τ²-bench corpus folder (``tools_<domain>.jsonl``, ``eval_<domain>.jsonl``, ``initial_hashes.json``), or None."""
    folder = tau2_data_dir() / "tau2" / "conformance"
    return folder if folder.is_dir() else None


def tau2_corpus(name: str) -> Path:
    """One file of the τ²-bench corpus; the test skips without it."""
    folder = tau2_corpus_dir()
    if folder is None or not (folder / name).is_file():
        pytest.skip(f"{TAU2_MISSING}: no {name}")
    return folder / name


def toolsandbox_corpus_files() -> list[Path]:
    """The ToolSandbox corpus files (``<source>.jsonl``), sorted; empty without the corpus."""
    return sorted((toolsandbox_data_dir() / "conformance").glob("*.jsonl"))


def need_toolsandbox_corpus() -> list[Path]:
    """The ToolSandbox corpus files; the test skips without them."""
    files = toolsandbox_corpus_files()
    if not files:
        pytest.skip(TOOLSANDBOX_MISSING)
    return files
