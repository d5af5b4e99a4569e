"""Where the tests find the conformance corpora: recorded from the real benchmarks, never shipped in the package.

They are in a complete data folder: the one the data variable names, a copy ``trace-gym data fetch`` installed
from a complete mirror, or the development ``../shared`` beside the checkout.  A test that needs them and finds
none is skipped, and its reason says so.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from trace_gym.data import locate

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
_SUB = {"tau2": Path("tau2") / "conformance", "toolsandbox": Path("conformance")}


def find_corpus_dir(benchmark: str) -> Path | None:
    """The folder of ``benchmark``'s conformance corpora (``None``: not on this machine)."""
    found, _ = locate(benchmark)
    places = [found.path] if found is not None and found.how != "packaged" else []
    if found is None or found.how != "env":  # a data variable is the only place looked at
        places.append(SHARED if benchmark == "tau2" else SHARED / "toolsandbox")
    for place in places:
        if (place / _SUB[benchmark]).is_dir():
            return place / _SUB[benchmark]
    return None


def missing(benchmark: str) -> str:
    """The reason a test that needs ``benchmark``'s corpora gives when they are not on this machine."""
    return (f"the {benchmark} conformance corpora are not on this machine (they are not shipped in the "
            f"package; tests read them from {SHARED / benchmark} or a complete data folder)")


def corpus_files(benchmark: str) -> list[Path]:
    """The ``*.jsonl`` files of ``benchmark``'s corpora, sorted (empty: not on this machine)."""
    folder = find_corpus_dir(benchmark)
    return sorted(folder.glob("*.jsonl")) if folder is not None else []


def corpus_dir(benchmark: str) -> Path:
    """:func:`find_corpus_dir`, skipping the calling test (with the reason) when there is none."""
    folder = find_corpus_dir(benchmark)
    if folder is None:
        pytest.skip(missing(benchmark))
    return folder


def complete_copy(benchmark: str) -> Path:
    """A complete data folder of ``benchmark`` (the corpora and every upstream file, beyond what the package
    ships), as a data root; the calling test is skipped when there is none."""
    folder = corpus_dir(benchmark)
    return folder.parent.parent if benchmark == "tau2" else folder.parent
