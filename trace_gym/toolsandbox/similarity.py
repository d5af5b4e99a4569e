"""Column similarities and the row-assignment score ToolSandbox builds on (EVALUATION.md §2, §3, §6).

A column similarity scores one snapshot cell against one target value and returns a float32
value in [0, 1], as upstream stores them.  :func:`table_similarity` turns a table of cells and
a table of target rows into the ``snapshot`` similarity: per-pair costs ``−ln(sim)`` averaged
over columns, an optimal one-to-one assignment of rows, and ``exp(−mean assigned cost)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import lru_cache
from itertools import permutations
from typing import Any

import numpy as np

from trace_gym.toolsandbox.scenarios import ColumnSimilarity

__all__ = [
    "ROUGE_MAX_CHARS",
    "column_similarity",
    "is_close",
    "prepare_rouge",
    "rouge_l",
    "table_similarity",
    "tool_trace_matches",
]

_MISSING = object()  # an argument absent from a traced call (never equal to anything)


# A text longer than this is not ROUGE-scored (it scores 0): a chat message or a reminder of more
# than ten thousand characters is not an answer, and reading it would make scoring cost grow with
# whatever an agent sends.  The longest text in upstream's recorded trajectories has under 1,600.
ROUGE_MAX_CHARS = 10_000


class _RougeL:
    """``rouge_score``'s tokenizer with the Porter stemmer, built once; the stemmer is memoised."""

    tokenize: Any = None
    fmeasure: Any = None

    @classmethod
    def prepare(cls) -> None:
        """Import rouge-score (it pulls in nltk: seconds) now rather than at the first score."""
        if cls.tokenize is None:
            from nltk.stem import porter
            from rouge_score import scoring, tokenize

            class _Stemmer:  # rouge-score's default stemmer, memoised per word
                stem = staticmethod(lru_cache(maxsize=1 << 16)(porter.PorterStemmer().stem))

            stemmer = _Stemmer()
            cls.fmeasure = staticmethod(scoring.fmeasure)
            cls.tokenize = staticmethod(lambda text: tokenize.tokenize(text, stemmer))


def prepare_rouge() -> None:
    """Load the ROUGE-L tokenizer ahead of the first :func:`rouge_l` call (a one-off import of seconds)."""
    _RougeL.prepare()


@lru_cache(maxsize=2048)
def _tokens(text: str) -> tuple[str, ...]:
    _RougeL.prepare()
    return tuple(_RougeL.tokenize(text))


def _lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of a longest common subsequence, bit-parallel over the shorter sequence (Hyyrö, 2004):
    one pass over the longer one, so scoring a long text against a short target stays linear."""
    if len(a) > len(b):
        a, b = b, a
    masks: dict[str, int] = {}
    for i, token in enumerate(a):
        masks[token] = masks.get(token, 0) | (1 << i)
    full = (1 << len(a)) - 1
    v = full
    for token in b:
        u = v & masks.get(token, 0)
        if u:
            v = ((v + u) | (v - u)) & full
    return len(a) - v.bit_count()


def rouge_l(target: str, prediction: str) -> float:
    """ROUGE-L F-measure of ``prediction`` against ``target`` (rouge-score's stemmed tokens), as float32.

    Equal to ``RougeScorer(["rougeL"], use_stemmer=True).score(target, prediction)``; a text longer
    than :data:`ROUGE_MAX_CHARS` scores 0 without being read.
    """
    if len(target) > ROUGE_MAX_CHARS or len(prediction) > ROUGE_MAX_CHARS:
        return 0.0
    return _rouge_l(target, prediction)


@lru_cache(maxsize=8192)
def _rouge_l(target: str, prediction: str) -> float:
    t, p = _tokens(target), _tokens(prediction)
    if not t or not p:
        return 0.0
    lcs = _lcs_length(t, p)
    precision, recall = lcs / len(p), lcs / len(t)
    return float(np.float32(_RougeL.fmeasure(precision, recall)))


def is_close(value: Any, reference: Any, atol: float | None) -> bool:
    """Upstream's closeness test: ``|value − reference| <= atol`` for two numbers when ``atol`` is
    set, plain Python equality otherwise (so ``2048 == 2048.0`` and ``True == 1`` hold)."""
    if value is _MISSING or reference is _MISSING:
        return False
    if atol is not None and isinstance(value, (int, float)) and isinstance(reference, (int, float)):
        return bool(abs(value - reference) <= atol)
    try:
        return bool(value == reference)
    except Exception:  # exotic objects whose == raises: not equal
        return False


def tool_trace_matches(cell: Any, golden: Any, atol: Mapping[str, float] | None) -> bool:
    """True iff some traced call in ``cell`` matches some golden alternative (EVALUATION.md §2).

    ``cell`` is ``None`` or a list of ``{tool_name, arguments, result}``; ``golden`` is one
    ``{tool_name, arguments}`` or a list of them.  Golden arguments must all be present and close;
    extra traced arguments are ignored.
    """
    if cell is None or not isinstance(cell, (list, tuple)):
        return False
    alternatives = [golden] if isinstance(golden, Mapping) else list(golden or ())
    for alt in alternatives:
        if not isinstance(alt, Mapping):
            continue
        want_args = alt.get("arguments") or {}
        for trace in cell:
            if not isinstance(trace, Mapping) or trace.get("tool_name", _MISSING) != alt.get("tool_name", _MISSING):
                continue
            got_args = trace.get("arguments")
            if not isinstance(got_args, Mapping):
                got_args = {}
            if all(
                is_close(got_args.get(name, _MISSING), want, atol.get(name) if atol is not None else None)
                for name, want in want_args.items()
            ):
                return True
    return False


def column_similarity(spec: ColumnSimilarity, column: str, cell: Any, value: Any) -> float:
    """Score of snapshot ``cell`` against target ``value`` for one column, a float32 in [0, 1]."""
    kind = spec.kind
    if kind == "exact":
        if value is None:
            return 1.0 if cell is None else 0.0
        return 1.0 if cell is not None and is_close(cell, value, None) else 0.0
    if kind == "rouge_l":
        if not isinstance(cell, str) or not isinstance(value, str):
            return 0.0
        return rouge_l(value, cell)
    if kind == "contains":
        return 1.0 if isinstance(cell, str) and isinstance(value, str) and value in cell else 0.0
    if kind == "one":
        return 1.0
    if kind == "close":
        atol = spec.atol.get(column) if spec.atol is not None else None
        return 1.0 if is_close(value, cell, atol) else 0.0
    if kind == "tool_trace":
        return 1.0 if tool_trace_matches(cell, value, spec.atol) else 0.0
    raise ValueError(f"unknown column similarity kind {kind!r}")


def _cost(similarity: float) -> float:
    """``−ln(sim)`` computed in float32, as upstream does; ``+inf`` for 0."""
    if similarity <= 0.0:
        return math.inf
    return float(-np.log(np.float32(similarity)))


def _min_assignment_mean(cost: list[list[float]]) -> float:
    """Mean cost of a minimum-cost perfect matching of a square matrix (``inf`` if none is finite)."""
    k = len(cost)
    if k == 1:
        return cost[0][0]
    if k <= 6:
        best = math.inf
        best_perm: tuple[int, ...] | None = None
        for perm in permutations(range(k)):
            total = 0.0
            for r, c in enumerate(perm):
                total += cost[r][c]
                if total >= best:
                    break
            else:
                best, best_perm = total, perm
        if best_perm is None:
            return math.inf
        return float(np.array([cost[r][c] for r, c in enumerate(best_perm)], dtype=np.float64).mean())
    from scipy.optimize import linear_sum_assignment  # only needed for tables of 7+ rows

    matrix = np.array(cost, dtype=np.float64)
    try:
        rows, cols = linear_sum_assignment(matrix)
    except ValueError:  # no assignment of finite cost
        return math.inf
    return float(matrix[rows, cols].mean())


def table_similarity(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str] | set[str] | frozenset[str],
    target_rows: Sequence[Mapping[str, Any]],
    column_specs: Mapping[str, ColumnSimilarity],
) -> float:
    """The ``snapshot`` similarity of a table against target rows (EVALUATION.md §3).

    ``columns`` are the table's column names (known even when it has no rows).  0 when the row
    counts differ or a target column is missing; otherwise the geometric mean over columns, then
    over optimally assigned rows.
    """
    if len(rows) != len(target_rows):
        return 0.0
    if not target_rows:
        return 1.0  # two empty tables (never produced by the scenarios, which all have targets)
    target_columns = list(target_rows[0].keys())
    if any(col not in columns for col in target_columns):
        return 0.0
    cost: list[list[float]] = []
    for target in target_rows:
        line = []
        for row in rows:
            total = 0.0
            for col in target_columns:
                total += _cost(column_similarity(column_specs[col], col, row.get(col), target.get(col)))
            line.append(total / len(target_columns))
        cost.append(line)
    mean = _min_assignment_mean(cost)
    if math.isinf(mean):
        return 0.0
    return float(np.exp(-mean))
