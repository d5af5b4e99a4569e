"""``trace-gym conformance tau2 FILE...``: agreement with tau2 1.0.1 on the recorded corpora.

* ``eval_<domain>.jsonl`` — each line is a trajectory scored by tau2.  We score it with
  :func:`trace_gym.tau2.evaluator.evaluate` (no NL judge: the corpus records those
  components as not judged too) and compare the reward, the whole ``reward_info``
  dump, ``reward_without_nl``, ``nl_assertions_judged``, the evaluation error (type and
  message) and the eight final/gold database hashes.
* ``tools_<domain>.jsonl`` — delegated to
  :func:`trace_gym.tau2.tool_conformance.replay_tool_corpus`.

Per-domain agreement is printed, then ``agreement: A/B (P%)``; the exit code is 0 only
at 100 %.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, TextIO

__all__ = ["run_conformance", "check_eval_record", "replay_eval_corpus", "check_corpus_file", "CorpusFileError"]

_HASH_KEYS = ("db_hash", "user_db_hash", "db_canonical_sha256", "user_db_canonical_sha256")
_TAU2_INFO_KEYS = (
    "reward", "db_check", "env_assertions", "action_checks", "nl_assertions",
    "communicate_checks", "reward_basis", "reward_breakdown", "info",
)


# The fields every record of a corpus file has (tools_<domain>.jsonl: call sequences; others: scored trajectories).
_TOOL_FIELDS = ("sequence_id", "domain", "calls")
_EVAL_FIELDS = ("domain", "task_id", "messages", "expected")


class CorpusFileError(ValueError):
    """A file that is not a conformance corpus (undecodable, a line that is not a JSON object, missing fields)."""


def check_corpus_file(path: str | Path) -> int:
    """Check that ``path`` is a corpus file before replaying it: UTF-8, one JSON object per non-blank line,
    each with the corpus fields; returns the number of records, or raises :class:`CorpusFileError`
    naming the file and line."""
    path = Path(path)
    fields = _TOOL_FIELDS if path.name.startswith("tools_") else _EVAL_FIELDS
    kind = "tool-call" if fields is _TOOL_FIELDS else "evaluation"
    count = 0
    try:
        with open(path, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise CorpusFileError(f"{path}:{lineno}: not a τ²-bench corpus: the line is not JSON ({exc})") from None
                missing = [f for f in fields if f not in record] if isinstance(record, dict) else list(fields)
                if missing:
                    raise CorpusFileError(f"{path}:{lineno}: not a τ²-bench {kind} corpus record: no {', '.join(missing)}")
                count += 1
    except UnicodeDecodeError as exc:
        raise CorpusFileError(f"{path}: not a τ²-bench corpus: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if not count:
        raise CorpusFileError(f"{path}: not a τ²-bench corpus: no records")
    return count


def _task_index(domain: str, data_dir: str | Path | None) -> dict[str, dict[str, Any]]:
    from .data import load_tasks

    return {t["id"]: t for t in load_tasks(domain, data_dir)}


def _diff(path: str, got: Any, want: Any, out: list[str]) -> None:
    """Collect human-readable differences between two JSON values (numbers compared by value)."""
    if isinstance(got, dict) and isinstance(want, dict):
        for k in sorted(set(got) | set(want), key=str):
            if k not in got:
                out.append(f"{path}.{k}: missing (want {want[k]!r})")
            elif k not in want:
                out.append(f"{path}.{k}: unexpected {got[k]!r}")
            else:
                _diff(f"{path}.{k}", got[k], want[k], out)
        return
    if isinstance(got, list) and isinstance(want, list):
        if len(got) != len(want):
            out.append(f"{path}: {len(got)} items, want {len(want)}")
            return
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            _diff(f"{path}[{i}]", g, w, out)
        return
    if type(got) is bool or type(want) is bool:
        if got is not want:
            out.append(f"{path}: {got!r}, want {want!r}")
        return
    if got != want:
        out.append(f"{path}: {str(got)[:200]!r}, want {str(want)[:200]!r}")


_HASH_CACHE: dict[Any, dict[str, Any]] = {}


def _db_signature(db: Any) -> Any:
    """A content key of a copy-on-write DB state (its base plus its changed records), or None."""
    base, changed, data = getattr(db, "_base", None), getattr(db, "_changed", None), getattr(db, "data", None)
    if base is None or changed is None or data is None:
        return None
    from .hashing import dumps

    parts = []
    for coll in sorted(changed):
        keys = changed[coll]
        value = data.get(coll)
        if keys is None or not isinstance(value, dict):
            parts.append((coll, None, dumps(value, "canonical")))
        else:
            for key in sorted(keys, key=str):
                parts.append((coll, str(key), dumps(value[key], "canonical") if key in value else "<missing>"))
    return (id(base), tuple(parts))


def _env_hashes(env: Any) -> dict[str, Any]:
    """``env.hashes()``, shared between states with the same content (hashing a 7 MB DB is slow)."""
    sig_db = _db_signature(env.db)
    sig_user = _db_signature(env.user_db) if env.user_db is not None else ("none",)
    if sig_db is None or sig_user is None:
        return env.hashes()
    key = (sig_db, sig_user)
    cached = _HASH_CACHE.get(key)
    if cached is None:
        if len(_HASH_CACHE) > 20000:
            _HASH_CACHE.clear()
        cached = _HASH_CACHE[key] = env.hashes()
    return cached


def check_eval_record(record: dict[str, Any], task: dict[str, Any], data_dir: str | Path | None = None) -> list[str]:
    """Score one eval-corpus record; the list of disagreements (empty = agreement)."""
    from .evaluator import evaluate, gold_environment, predicted_environment

    domain = record["domain"]
    want = record["expected"]
    messages = record["messages"]
    ev = evaluate(task, messages, record["termination_reason"], domain,
                  solo_mode=record.get("solo_mode", False), data_dir=data_dir)
    problems: list[str] = []
    want_err = want.get("evaluation_error")
    got_err = ev.evaluation_error
    if (want_err is None) != (got_err is None):
        problems.append(f"evaluation_error: {got_err!r}, want {want_err!r}")
    elif want_err is not None and (got_err["type"], got_err["message"]) != (want_err["type"], want_err["message"]):
        problems.append(f"evaluation_error: {got_err!r}, want {want_err!r}")
    if want_err is None:
        got_info = {k: ev.reward_info.get(k) for k in _TAU2_INFO_KEYS} if ev.reward_info is not None else None
        _diff("reward", ev.reward, want.get("reward"), problems)
        _diff("reward_info", got_info, want.get("reward_info"), problems)
        _diff("reward_without_nl", ev.reward_without_nl, want.get("reward_without_nl"), problems)
        _diff("nl_assertions_judged", ev.nl_assertions_judged, want.get("nl_assertions_judged"), problems)
    # Hashes are recorded for every trajectory, whatever the termination.
    pred = ev.predicted_env
    if pred is None:
        try:
            pred = predicted_environment(task, messages, domain, solo_mode=record.get("solo_mode", False), data_dir=data_dir)
        except Exception as exc:  # noqa: BLE001
            problems.append(f"replay raised {type(exc).__name__}: {exc}")
            return problems
    gold = ev.gold_env or gold_environment(task, domain, data_dir)
    for prefix, env in (("final", pred), ("gold", gold)):
        hashes = _env_hashes(env)
        for key in _HASH_KEYS:
            wkey = f"{prefix}_{key}"
            if wkey in want and hashes[key] != want[wkey]:
                problems.append(f"{wkey}: {hashes[key]}, want {want[wkey]}")
    return problems


def replay_eval_corpus(
    path: str | Path, data_dir: str | Path | None = None
) -> tuple[dict[str, list[int]], list[tuple[str, list[str]]]]:
    """Check every record of an eval corpus: ({domain: [agree, total]}, failures)."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    failures: list[tuple[str, list[str]]] = []
    tasks_by_domain: dict[str, dict[str, dict[str, Any]]] = {}
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            label = f"{Path(path).name}:{lineno}"
            try:
                record = json.loads(line)
                domain = record["domain"]
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                counts["?"][1] += 1
                failures.append((label, [f"unreadable record: {exc}"]))
                continue
            counts[domain][1] += 1
            label = f"{label} {domain}/{record.get('task_id')}/{record.get('variant')}"
            if domain not in tasks_by_domain:
                tasks_by_domain[domain] = _task_index(domain, data_dir)
            task = tasks_by_domain[domain].get(record.get("task_id"))
            if task is None:
                failures.append((label, [f"unknown task id {record.get('task_id')!r}"]))
                continue
            try:
                problems = check_eval_record(record, task, data_dir)
            except Exception as exc:  # noqa: BLE001 - one bad record must not stop the run
                problems = [f"checker raised {type(exc).__name__}: {exc}"]
            if problems:
                failures.append((label, problems))
            else:
                counts[domain][0] += 1
    return dict(counts), failures


def _tool_corpus(path: str | Path, data_dir: str | Path | None) -> tuple[dict[str, list[int]], list[tuple[str, list[str]]]]:
    from .tool_conformance import replay_tool_corpus

    agree, total, failures = replay_tool_corpus(path, data_dir)
    domain = Path(path).stem.split("_", 1)[-1]
    rows: list[tuple[str, list[str]]] = []
    for f in failures:
        if isinstance(f, dict):
            label = f"{Path(path).name} {f.get('sequence_id')}#{f.get('i')} {f.get('name', '')}".rstrip()
            rows.append((label, [json.dumps(f, default=str)[:800]]))
        else:
            rows.append((Path(path).name, [str(f)[:800]]))
    return {f"tools:{domain}": [agree, total]}, rows


def run_conformance(files: Sequence[str | Path] | Iterable[str | Path], verbose: bool = False,
                    data_dir: str | Path | None = None, out: TextIO | None = None) -> int:
    """Replay corpora, print per-domain agreement and ``agreement: A/B (P%)``; 0 only at 100 %."""
    out = out or sys.stdout
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for f in files:
        name = Path(f).name
        if not Path(f).is_file():
            print(f"{f}: no such file", file=out)
            totals["?"][1] += 1
            continue
        try:
            if name.startswith("tools_"):
                counts, failures = _tool_corpus(f, data_dir)
            else:
                counts, failures = replay_eval_corpus(f, data_dir)
        except Exception as exc:  # noqa: BLE001 - e.g. data folder missing
            print(f"{f}: cannot replay: {type(exc).__name__}: {exc}", file=out)
            totals["?"][1] += 1
            continue
        for key, (a, t) in counts.items():
            totals[f"{key}" if key.startswith("tools:") else f"eval:{key}"][0] += a
            totals[f"{key}" if key.startswith("tools:") else f"eval:{key}"][1] += t
        if verbose:
            for label, problems in failures:
                print(f"DISAGREE {label}", file=out)
                for p in problems[:10]:
                    print(f"    {p}", file=out)
    agree = sum(a for a, _ in totals.values())
    total = sum(t for _, t in totals.values())
    for key in sorted(totals):
        a, t = totals[key]
        pct = 100.0 * a / t if t else 0.0
        print(f"{key}: {a}/{t} ({pct:.1f}%)", file=out)
    pct = 100.0 * agree / total if total else 0.0
    print(f"agreement: {agree}/{total} ({pct:.1f}%)", file=out)
    return 0 if total and agree == total else 1
