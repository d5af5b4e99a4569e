"""ToolSandbox's exporter (``trace-gym data fetch toolsandbox``): a copy of the data folder (a folder or an
archive of one, verified file by file), or the data folder built from upstream's own source by running it.

Upstream (``apple/ToolSandbox`` at :data:`PINNED_COMMIT`) defines its scenarios as Python code.  The exporter
runs that code with upstream's pinned dependencies in a private venv under the per-user cache (never the
user's environment), with a frozen clock (:data:`REFERENCE_CLOCK`, ``TZ=UTC``) and deterministic ids, and
serializes the result as data (``scenarios/base_scenarios.jsonl``).  The scenarios are also built under two
other clocks (:data:`ALTERNATE_CLOCKS`) to explain every clock-dependent value (``time_dependent_values``).

What running upstream's code gives, and what it does not (:data:`NOT_DERIVABLE`): ``LICENSE`` (verbatim) and
the scenarios are derived; ``tools.json`` (its RapidAPI knowledge base, canned answers and tool-semantics
annotations), ``EVALUATION.md``, ``manifest.json`` and the conformance corpora were authored or recorded by
the original export and have to come from a copy of the data folder (``--from``).

Steps, each reported through ``log``: get the source (a checkout, an archive, or the pinned commit's archive
from GitHub, kept in the cache once complete), make or reuse the private venv (a marker file says it is
complete; an interrupted install is resumed by pip), run :mod:`._toolsandbox_worker` once per clock, and render.
:class:`ToolSandboxExporter` verifies the files against the shipped checksums and installs them atomically.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .archive import archive_names, extract
from .files import DataFetchError, download, install_staged, matches, sha256_path, staging
from .locations import cache_root
from .manifest import load_manifest
from .mirror import install_from_sources

__all__ = ["PINNED_COMMIT", "ARCHIVE_URL", "SRC_ENV", "PYTHON_ENV", "DERIVED", "NOT_DERIVABLE", "export",
           "is_upstream_source", "build_records", "time_dependent_values", "render_scenarios", "ToolSandboxExporter"]

PINNED_COMMIT = "165848b9a78cead7ca7fe7c89c688b58e6501219"
ARCHIVE_URL = "https://codeload.github.com/apple/ToolSandbox/tar.gz/{commit}"
REFERENCE_CLOCK = "2025-06-04T09:00:00"
ALTERNATE_CLOCKS = ("2024-02-27T13:30:00", "2026-11-20T07:15:00")
SRC_ENV = "TRACE_GYM_TOOLSANDBOX_SRC"  # an upstream checkout or archive (the tests' end-to-end export)
PYTHON_ENV = "TRACE_GYM_TOOLSANDBOX_PYTHON"  # the Python 3.11 interpreter for the private venv
SCENARIOS = "scenarios/base_scenarios.jsonl"
DERIVED = (SCENARIOS, "LICENSE")
NOT_DERIVABLE = {
    "tools.json": "its RapidAPI knowledge base and canned responses (synthetic values), and the tools' reads/"
                  "writes/preconditions/matching/effect annotations, were authored by the original export",
    "EVALUATION.md": "a specification written by the original export",
    "manifest.json": "it lists the public/hidden split of the conformance corpus, chosen by the original export",
    "conformance/": "the corpora replay hand-written oracle and variant trajectories",
}
HASH_SEED = "126"
# What upstream's evaluator scores the reference (oracle) trajectories, a result of the hand-written oracles
# of the original export's corpus rather than of upstream's scenario code: 1.0 for every scenario but this one
# (its milestone 3 needs a tool the scenario does not offer).
ORACLE_SIMILARITY = {"find_temperature_f_with_location_and_time_diff_low_battery_mode_multiple_user_turn": 0.6}
_VENV_MARKER = ".trace-gym-complete"
_MARK = "trace-gym-export"
_WORKER = Path(__file__).with_name("_toolsandbox_worker.py")

SIMILARITY = {"snapshot_similarity": "snapshot", "addition_similarity": "addition", "removal_similarity": "removal",
              "update_similarity": "update", "tool_trace_dependant_similarity": "tool_trace_dependant",
              "guardrail_similarity": "guardrail"}
COLUMN = {"column_exact_match_similarity": "exact", "column_rouge_l_similarity": "rouge_l",
          "column_contains_similarity": "contains", "column_one_similarity": "one",
          "column_tool_trace_exact_match_similarity": "tool_trace", "column_close_similarity": "close"}


def _out(key: str, path: list[str], cast: str | None) -> dict[str, Any]:
    return {"key": key, "path": path, "cast": cast}


# upstream's tool-trace extractors (tool_sandbox/common/tool_trace_extractors.py), described as data
EXTRACTORS: dict[str, dict[str, Any]] = {
    "search_weather_around_lat_lon_temperature_extractor": {
        "outputs": [_out("temperature", ["result", "current_temperature"], "float")],
        "normalization": "float_surface_forms", "errors_yield_no_candidate": ["KeyError", "TypeError"]},
    "result_to_timestamp0_extractor": {"outputs": [_out("timestamp_0", ["result"], "float")], "normalization": None},
    "result_to_timestamp1_extractor": {"outputs": [_out("timestamp_1", ["result"], "float")], "normalization": None},
    "days_extractor": {"outputs": [_out("days", ["result", "days"], "int")], "normalization": None},
    "current_temperature_extractor": {"outputs": [_out("amount", ["result", "current_temperature"], "float")],
                                      "normalization": None},
    "result_to_temperature_extractor": {"outputs": [_out("temperature", ["result"], "float")],
                                        "normalization": "float_surface_forms"},
    "lat_lon_dict_extractor": {"outputs": [_out("latitude", ["result", "latitude"], None),
                                           _out("longitude", ["result", "longitude"], None)], "normalization": None},
    "result_to_reminder_timestamp_lowerbound_extractor": {
        "outputs": [_out("reminder_timestamp_lowerbound", ["result"], "float")], "normalization": None},
    "min_temperature_amount_extractor": {"outputs": [_out("amount", ["result", "min_temperature"], "float")],
                                         "normalization": None},
    "min_temperature_extractor": {"outputs": [_out("min_temperature", ["result"], "float")],
                                  "normalization": "float_surface_forms"},
}


# --------------------------------------------------------------------------- serialization (no upstream needed)


def _column(desc: dict[str, Any]) -> dict[str, Any]:
    kind = COLUMN.get(desc["name"])
    if kind is None:
        raise DataFetchError(f"upstream uses an unknown column similarity {desc['name']!r}; update trace-gym")
    out: dict[str, Any] = {"kind": kind}
    for key, value in (desc.get("keywords") or {}).items():
        if key != "atol_dict":
            raise DataFetchError(f"{desc['name']}: unexpected parameter {key!r}; update trace-gym")
        out["atol_dict"] = value
    return out


def _rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Target rows; a ``tool_trace`` cell (a JSON string upstream) becomes a list of alternative traces."""
    out = []
    for row in rows:
        row = dict(row)
        if isinstance(row.get("tool_trace"), str):
            trace = json.loads(row["tool_trace"])
            row["tool_trace"] = trace if isinstance(trace, list) else [trace]
        out.append(row)
    return out


def _constraint(c: dict[str, Any]) -> dict[str, Any]:
    sim = c["similarity"]
    kind = SIMILARITY.get(sim["name"])
    if kind is None:
        raise DataFetchError(f"upstream uses an unknown snapshot similarity {sim['name']!r}; update trace-gym")
    out = {"database": c["database"], "similarity": kind,
           "reference_milestone_node_index": c["reference_milestone_node_index"],
           "target_columns": c["target_columns"], "target_dtypes": c["target_dtypes"],
           "target_rows": _rows(c["target_rows"]),
           "column_similarity": {k: _column(v) for k, v in c["column_similarity"].items()}}
    if kind == "tool_trace_dependant":
        kw = sim.get("keywords") or {}
        name = kw.get("extractor", {}).get("name")
        if name not in EXTRACTORS:
            raise DataFetchError(f"upstream uses an unknown tool-trace extractor {name!r}; update trace-gym")
        out["tool_trace_dependant"] = {"fill_to": kw.get("fill_to"), "extractor": {"name": name, **EXTRACTORS[name]}}
    return out


def _nodes(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**n, "constraints": [_constraint(c) for c in n["constraints"]]} for n in nodes]


def build_records(doc: dict[str, Any], oracle_similarity: dict[str, float] | None = None) -> list[dict[str, Any]]:
    """The scenario records (without ``time_dependent_values``) from one worker build ``doc``."""
    instruction = doc["user_instruction"]
    records = []
    for s in doc["scenarios"]:
        box = s["sandbox"]
        prompts = [m["content"] for m in box if m["sender"] == "SYSTEM" and m["recipient"] == "USER"
                   and m["visible_to"] is None]
        agent = [m["content"] for m in box if m["sender"] == "SYSTEM" and m["recipient"] == "AGENT"]
        prompt = prompts[-1] if prompts else None
        ranking = s["distraction_tool_ranking"]
        records.append({
            "name": s["name"], "source": s["source"], "categories": [*s["categories"], "NO_DISTRACTION_TOOLS"],
            "base_world": s["base_world"], "max_messages": s["max_messages"],
            "tool_allow_list": s["tool_allow_list"], "tool_deny_list": s["tool_deny_list"],
            "agent_tools": s["agent_tools"], "user_tools": s["user_tools"],
            "agent_system_prompt": agent[-1] if agent else None,
            "user_simulator_system_prompt": prompt,
            "user_simulator_task": prompt[len(instruction):] if prompt and prompt.startswith(instruction) else prompt,
            "first_user_messages": [m["content"] for m in box if m["sender"] == "USER" and m["recipient"] == "AGENT"
                                    and m["visible_to"] is None],
            "user_simulator_few_shot": [{k: m[k] for k in ("sender", "recipient", "content")} for m in box
                                        if m["visible_to"] == ["USER"]],
            "sandbox": box, "first_user_sandbox_message_index": s["first_user_sandbox_message_index"],
            "world": s["world"],
            "milestones": _nodes(s["milestones"]), "milestone_edges": s["milestone_edges"],
            "milestone_edges_declared": s["milestone_edges_declared"],
            "minefields": _nodes(s["minefields"]), "minefield_edges": s["minefield_edges"],
            "minefield_edges_declared": s["minefield_edges_declared"],
            "augmentations": {"distraction_tool_ranking": ranking,
                              "variants": {"3_distraction_tools": ranking[:3], "10_distraction_tools": ranking[:10],
                                           "all_tools": ranking}},
            "time_dependent_values": [],
            "oracle_similarity": (oracle_similarity or {}).get(s["name"], 1.0),
        })
    return records


def _leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, f"{path}/{str(k).replace('~', '~0').replace('/', '~1')}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, f"{path}/{i}")
    else:
        yield path, value


def _utc(naive: _dt.datetime) -> float:
    """POSIX time of a naive clock reading in the export's time zone (UTC)."""
    return naive.replace(tzinfo=_dt.UTC).timestamp()


def _explain(values: list[Any], clocks: list[_dt.datetime]) -> dict[str, Any] | None:
    """The expression that gives ``values[i]`` at ``clocks[i]`` for every clock (``None``: none fits)."""
    ref, now = values[0], clocks[0]
    if isinstance(ref, str):
        template = ref.replace(str(now.year), "{year}")
        if "{year}" in template and all(v == template.replace("{year}", str(c.year)) for v, c in zip(values, clocks, strict=True)):
            return {"kind": "text_with_year", "template": template}
        return None
    if isinstance(ref, bool) or not isinstance(ref, (int, float)):
        return None
    if isinstance(ref, int) and all(v == c.year for v, c in zip(values, clocks, strict=True)):
        return {"kind": "current_year"}
    seconds = float(ref) - _utc(now)
    if all(float(v) - _utc(c) == seconds for v, c in zip(values, clocks, strict=True)):
        return {"kind": "now_offset", "seconds": seconds}
    times = [_dt.datetime.fromtimestamp(float(v), _dt.UTC).replace(tzinfo=None) for v in values]
    tod = times[0].strftime("%H:%M:%S")
    days = (times[0].date() - now.date()).days
    if all(t.strftime("%H:%M:%S") == tod and (t.date() - c.date()).days == days for t, c in zip(times, clocks, strict=True)):
        return {"kind": "local_day_at", "days": days, "time_of_day": tod}
    iso = times[0].isoweekday()
    if all(t.strftime("%H:%M:%S") == tod and t.isoweekday() == iso and 0 <= (t.date() - c.date()).days <= 6
           for t, c in zip(times, clocks, strict=True)):
        return {"kind": "next_isoweekday_at", "isoweekday": iso, "time_of_day": tod}
    return None


def time_dependent_values(builds: list[dict[str, Any]], clocks: list[str]) -> list[dict[str, Any]]:
    """Explain every leaf of one scenario record that differs between its builds under ``clocks``
    (``builds[0]`` is the reference); raises :class:`DataFetchError` for a change no expression explains."""
    stamps = [_dt.datetime.fromisoformat(c) for c in clocks]
    others = [dict(_leaves(b)) for b in builds[1:]]
    out = []
    for path, value in _leaves(builds[0]):
        values = [value, *(o.get(path) for o in others)]
        if all(v == value for v in values):
            continue
        expr = _explain(values, stamps)
        if expr is None:
            raise DataFetchError(f"{builds[0].get('name')}: {path} changes with the clock in a way trace-gym cannot "
                                 f"describe ({values!r:.200}); the upstream source is not the pinned commit?")
        out.append({"path": path, "value": value, "expr": expr})
    return out


def render_scenarios(docs: list[dict[str, Any]], clocks: list[str], oracle_similarity: dict[str, float] | None = None
                     ) -> bytes:
    """``scenarios/base_scenarios.jsonl`` from the worker's builds (``docs[i]`` under ``clocks[i]``; the first is
    the reference clock)."""
    per_clock = [build_records(d, oracle_similarity) for d in docs]
    names = [r["name"] for r in per_clock[0]]
    if any([r["name"] for r in recs] != names for recs in per_clock[1:]):
        raise DataFetchError("upstream built different scenarios under different clocks; cannot export")
    lines = []
    for i, record in enumerate(per_clock[0]):
        record["time_dependent_values"] = time_dependent_values([recs[i] for recs in per_clock], clocks)
        lines.append(json.dumps(record) + "\n")
    return "".join(lines).encode("utf-8")


# --------------------------------------------------------------------------- upstream source


def is_upstream_source(source: str | Path) -> bool:
    """Whether a local folder or archive holds upstream's code (``tool_sandbox/scenarios/``)."""
    path = Path(source).expanduser()
    if path.is_dir():
        return _upstream_root(path) is not None
    return path.is_file() and any("tool_sandbox/scenarios/" in n for n in archive_names(path))


def _upstream_root(folder: Path) -> Path | None:
    for cand in (folder, *(c for c in sorted(folder.iterdir()) if c.is_dir())):
        if (cand / "tool_sandbox" / "scenarios").is_dir() and (cand / "pyproject.toml").is_file():
            return cand
    return None


def _pinned_archive(url: str | None, log: Callable[[str], None]) -> Path:
    """The pinned commit's archive, downloaded once into the cache (a partial download is started over)."""
    folder = cache_root() / "toolsandbox-upstream"
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / f"ToolSandbox-{PINNED_COMMIT}.tar.gz"
    if url is None and final.is_file():
        log(f"[1/4] upstream source: reusing {final}")
        return final
    partial = final.with_name(final.name + f".partial-{os.getpid()}")
    try:
        log(f"[1/4] upstream source: downloading apple/ToolSandbox@{PINNED_COMMIT[:12]}")
        download(url or ARCHIVE_URL.format(commit=PINNED_COMMIT), partial, log)
        if url is not None:
            return partial
        os.replace(partial, final)
    except BaseException:
        if url is None:
            partial.unlink(missing_ok=True)
        raise
    return final


def _source_root(source: str | None, work: Path, log: Callable[[str], None]) -> Path:
    if source is None or source.startswith(("http://", "https://")):
        archive = _pinned_archive(source, log)
        extract(archive, work / "src")
        if source is not None:
            archive.unlink(missing_ok=True)
    else:
        path = Path(source).expanduser()
        if path.is_dir():
            log(f"[1/4] upstream source: the checkout {path}")
            root = _upstream_root(path)
            if root is None:
                raise DataFetchError(f"--from {source}: no tool_sandbox/scenarios/ and pyproject.toml here; "
                                     "is this a checkout of apple/ToolSandbox?")
            shutil.copytree(root, work / "src" / "checkout", ignore=shutil.ignore_patterns(".git", "__pycache__"))
        else:
            log(f"[1/4] upstream source: unpacking {path}")
            extract(path, work / "src")
    root = _upstream_root(work / "src")
    if root is None:
        raise DataFetchError(f"{source or ARCHIVE_URL.format(commit=PINNED_COMMIT)}: no ToolSandbox code "
                             "(tool_sandbox/scenarios/) in it")
    return root


# --------------------------------------------------------------------------- private venv and worker


def _python() -> str:
    """A Python 3.11 interpreter (upstream's reference version) to make the private venv with."""
    cands = [os.environ.get(PYTHON_ENV), shutil.which("python3.11"),
             sys.executable if sys.version_info[:2] == (3, 11) else None]
    for c in cands:
        if c and shutil.which(c) or (c and Path(c).is_file()):
            return c
    raise DataFetchError("the ToolSandbox export runs upstream with Python 3.11, and none was found: install "
                         f"python3.11, or set {PYTHON_ENV} to its path")


def _requirements(root: Path) -> list[str]:
    import tomllib

    try:
        deps = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    except (OSError, ValueError, KeyError) as exc:
        raise DataFetchError(f"{root}/pyproject.toml: cannot read upstream's dependencies ({exc})") from None
    return [str(d) for d in deps]


def _run(cmd: list[str], log: Callable[[str], None], *, env: dict[str, str] | None = None,
         cwd: Path | None = None, what: str) -> None:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=cwd)
    tail: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        line = line.rstrip()
        tail = (tail + [line])[-15:]
        if line.startswith(("Collecting ", "Installing collected", "Successfully installed", "built ")):
            log(f"  {line.split(' (from ', 1)[0][:160]}")
    if proc.wait() != 0:
        raise DataFetchError(f"{what} failed (exit {proc.returncode}):\n  " + "\n  ".join(tail)
                             + "\nFix the cause above and run the same command again (finished steps are reused).")


def _venv(root: Path, log: Callable[[str], None], parent: Path) -> Path:
    """The private venv's interpreter, with upstream's pinned dependencies (made or resumed as needed)."""
    python = _python()
    reqs = _requirements(root)
    key = hashlib.sha256(json.dumps([python, reqs]).encode()).hexdigest()[:12]
    venv = parent / f"venv-py311-{key}"
    exe = venv / "bin" / "python"
    marker = venv / _VENV_MARKER
    if marker.is_file() and exe.is_file():
        log(f"[2/4] private venv: reusing {venv}")
        return exe
    log(f"[2/4] private venv: installing upstream's {len(reqs)} pinned dependencies into {venv} (a few minutes)")
    if venv.exists() and not exe.is_file():
        shutil.rmtree(venv)
    if not exe.is_file():
        _run([python, "-m", "venv", str(venv)], log, what="creating the private venv")
    reqfile = venv / "upstream-requirements.txt"
    reqfile.write_text("\n".join(reqs) + "\n", encoding="utf-8")
    _run([str(exe), "-m", "pip", "install", "--disable-pip-version-check", "-r", str(reqfile)], log,
         what="installing upstream's dependencies into the private venv")
    marker.write_text(json.dumps({"python": python, "requirements": reqs}) + "\n", encoding="utf-8")
    return exe


def _worker_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    # Upstream appends guardrails by iterating a set of database names, so their order follows str hashing;
    # HASH_SEED is a seed under which that order is the reference export's (the scenarios then match byte for byte).
    env.update(TZ="UTC", PYTHONHASHSEED=HASH_SEED, PYTHONDONTWRITEBYTECODE="1", PYTHONNOUSERSITE="1")
    return env


def _build(exe: Path, root: Path, clocks: list[str], work: Path, log: Callable[[str], None]) -> list[dict[str, Any]]:
    docs = []
    for i, clock in enumerate(clocks, 1):
        log(f"[3/4] running upstream's scenario builders under the frozen clock {clock} UTC ({i}/{len(clocks)})")
        out = work / f"build-{i}.json"
        _run([str(exe), str(_WORKER), str(root), clock, str(out)], log, env=_worker_env(), cwd=work,
             what=f"running upstream's scenario code (clock {clock})")
        docs.append(json.loads(out.read_text(encoding="utf-8")))
    return docs


def export(source: str | None, log: Callable[[str], None], *, venv_parent: Path | None = None) -> dict[str, bytes]:
    """Run upstream (``source``: a checkout, an archive, a URL of one, or ``None`` for the pinned commit's
    archive on GitHub) and return the derived files (:data:`DERIVED`) as ``{path: bytes}``."""
    parent = cache_root() / "toolsandbox-upstream"
    parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="export-", dir=parent))
    try:
        root = _source_root(source, work, log)
        exe = _venv(root, log, venv_parent or parent)
        clocks = [REFERENCE_CLOCK, *ALTERNATE_CLOCKS]
        docs = _build(exe, root, clocks, work, log)
        log(f"[4/4] serializing {len(docs[0]['scenarios'])} scenarios")
        files = {SCENARIOS: render_scenarios(docs, clocks, ORACLE_SIMILARITY)}
        license_file = root / "LICENSE"
        if license_file.is_file():
            files["LICENSE"] = license_file.read_bytes()
        return files
    finally:
        shutil.rmtree(work, ignore_errors=True)


# --------------------------------------------------------------------------- install (trace-gym data fetch)


def install(source: str | None, dest: Path, log: Callable[[str], None], *, venv_parent: Path | None = None
            ) -> dict[str, Any]:
    """Export from upstream, verify every derived file against the shipped checksums and install them at
    ``dest`` atomically.  Verified files of an existing copy at ``dest`` that the export cannot make are kept."""
    manifest = load_manifest("toolsandbox")
    files = export(source, log, venv_parent=venv_parent)
    bad = [rel for rel, data in files.items() if not matches(data, manifest["files"][rel])]
    if bad:
        raise DataFetchError(f"exported {', '.join(bad)} from {source or 'the pinned upstream archive'}, but it differs "
                             f"from the checksum of {manifest['version']}: is the source apple/ToolSandbox at "
                             f"{PINNED_COMMIT}? Nothing was installed.")
    log(f"verified {len(files)} exported file(s) against the shipped checksums (byte for byte): {', '.join(files)}")
    staged = staging(dest)
    try:
        for rel, data in files.items():
            (staged / rel).parent.mkdir(parents=True, exist_ok=True)
            (staged / rel).write_bytes(data)
        kept = []
        for rel, entry in manifest["files"].items():
            old = dest / rel
            if rel not in files and old.is_file() and old.stat().st_size == entry["size"] \
                    and sha256_path(old) == entry["sha256"]:
                (staged / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(old, staged / rel)
                kept.append(rel)
        missing = sorted(r for r in manifest["files"] if r not in files and r not in kept)
        marker = {"benchmark": "toolsandbox", "version": manifest["version"],
                  "source": source or ARCHIVE_URL.format(commit=PINNED_COMMIT), "files": len(files) + len(kept),
                  "not_in_source": missing, "derived": {rel: ["ran upstream's code"] for rel in files}, "kept": kept}
        install_staged(staged, dest, marker)
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    return {"path": str(dest), "files": len(files) + len(kept), "not_in_source": missing, "derived": sorted(files),
            "kept": kept}


def missing_note(missing: list[str]) -> str | None:
    """Which files an export could not make, why, and what is still needed (``None``: nothing missing)."""
    if not missing:
        return None
    required = load_manifest("toolsandbox")["files"]
    lines = [f"{len(missing)} file(s) cannot be derived by running upstream's code and were not installed:"]
    for rel in missing:
        why = NOT_DERIVABLE.get(rel) or NOT_DERIVABLE.get(rel.split("/", 1)[0] + "/", "not produced by upstream's code")
        lines.append(f"  {rel}{' (REQUIRED by the engine)' if required[rel]['required'] else ''}: {why}")
    if any(required[r]["required"] for r in missing):
        lines.append("The ToolSandbox environments cannot run without the required file(s). Get a copy of the data "
                     "folder (or an archive of it) and run: trace-gym data fetch toolsandbox --from PATH_OR_URL")
    return "\n".join(lines)


class ToolSandboxExporter:
    """``trace-gym data fetch toolsandbox``: from a copy of the data folder (a folder or an archive of one,
    verified file by file), or by running upstream's code (no source, a checkout or an archive of it, or a
    URL of either, told apart by its content)."""

    benchmark = "toolsandbox"
    derived_what = "files (exported by running upstream's code)"

    def fetch(self, source: str | None, dest: Path, log: Callable[[str], None]) -> dict[str, Any]:
        if source is not None and source.startswith(("http://", "https://")):
            tmp = staging(dest, "download")
            try:
                local = tmp / "download"
                download(source, local, log)
                return self.fetch(str(local), dest, log)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        if source is None or (Path(source).expanduser().exists() and is_upstream_source(source)):
            return install(source, dest, log)
        return install_from_sources(load_manifest(self.benchmark), [(source, None)], dest, log, label=source)

    def missing_note(self, missing: list[str], dest: str | Path) -> str | None:
        return missing_note(missing)
