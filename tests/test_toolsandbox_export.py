"""``trace-gym data fetch toolsandbox`` exporting the data from upstream's own code.

The serialization helpers are tested on small hand-made builds (no upstream needed); the download path runs
against a loopback HTTP server with upstream's run replaced by canned builds.  The end-to-end export runs the
real upstream when ``TRACE_GYM_TOOLSANDBOX_SRC`` names a checkout or archive of apple/ToolSandbox at the pinned
commit (it makes a private venv with upstream's pinned dependencies: minutes the first time; set
``TRACE_GYM_TOOLSANDBOX_VENVS`` to a folder to keep that venv between runs).
"""

from __future__ import annotations

import copy
import datetime as dt
import functools
import hashlib
import http.server
import json
import os
import tarfile
import threading
from pathlib import Path

import pytest

from tests.datafetch_fake_tau2 import use_manifest
from trace_gym import data as datafetch
from trace_gym.cli import main
from trace_gym.data import DataFetchError, fetch, verify_folder
from trace_gym.data import toolsandbox_export as ex

CLOCKS = [ex.REFERENCE_CLOCK, *ex.ALTERNATE_CLOCKS]
INSTRUCTION = "Role play as a user.\n"


def _ts(clock: str, **delta: float) -> float:
    return (dt.datetime.fromisoformat(clock) + dt.timedelta(**delta)).replace(tzinfo=dt.UTC).timestamp()


def _fn(name: str, **keywords) -> dict:
    return {"name": name, "module": "tool_sandbox.common.evaluation", **({"keywords": keywords} if keywords else {})}


def _msg(i: int, sender: str, recipient: str, content: str, visible_to=None) -> dict:
    return {"sandbox_message_index": i, "sender": sender, "recipient": recipient, "content": content,
            "openai_tool_call_id": None, "openai_function_name": None, "conversation_active": True,
            "tool_call_exception": None, "tool_trace": None, "visible_to": visible_to}


def fake_build(clock: str) -> dict:
    """What the worker writes for one small scenario built under ``clock``."""
    year = dt.datetime.fromisoformat(clock).year
    tomorrow_5pm = (dt.datetime.fromisoformat(clock) + dt.timedelta(days=1)).replace(hour=17, minute=0, second=0)
    trace = json.dumps({"tool_name": "search_holiday", "arguments": {"holiday_name": "Christmas", "year": year}})
    milestone = {"index": 0, "constraints": [{
        "database": "SANDBOX", "similarity": _fn("snapshot_similarity"), "reference_milestone_node_index": None,
        "target_columns": ["tool_trace"], "target_dtypes": {"tool_trace": "String"},
        "target_rows": [{"tool_trace": trace}],
        "column_similarity": {"tool_trace": _fn("column_tool_trace_exact_match_similarity",
                                                atol_dict={"latitude": 0.5})}}, {
        "database": "REMINDER", "similarity": _fn("addition_similarity"), "reference_milestone_node_index": -1,
        "target_columns": ["reminder_timestamp"], "target_dtypes": {"reminder_timestamp": "Float64"},
        "target_rows": [{"reminder_timestamp": tomorrow_5pm.replace(tzinfo=dt.UTC).timestamp()}],
        "column_similarity": {"reminder_timestamp": _fn("column_close_similarity",
                                                        atol_dict={"reminder_timestamp": 1})}}, {
        "database": "SANDBOX", "reference_milestone_node_index": 0, "target_columns": ["content"],
        "similarity": _fn("tool_trace_dependant_similarity", fill_to="content",
                          extractor={"name": "days_extractor", "module": "x"}),
        "target_dtypes": {"content": "String"}, "target_rows": [{"content": "{days} days"}],
        "column_similarity": {"content": _fn("column_contains_similarity")}}],
        "guardrail_database_list": ["SANDBOX", "SETTING"], "guardrail_database_exclusion_list": None,
        "guardrails": [{"database": "SETTING", "reference_milestone_node_index": -1}]}
    prompt = f"{INSTRUCTION}Christmas is 12/25/{year}."
    return {"clock": clock, "user_instruction": INSTRUCTION, "scenarios": [{
        "name": "demo", "source": "single_tool_call_scenarios", "categories": ["SINGLE_TOOL_CALL"],
        "base_world": "base", "max_messages": 30, "tool_allow_list": ["end_conversation", "search_holiday"],
        "tool_deny_list": None, "agent_tools": ["search_holiday"], "user_tools": ["end_conversation"],
        "sandbox": [_msg(0, "SYSTEM", "EXECUTION_ENVIRONMENT", "import json\n"),
                    _msg(1, "SYSTEM", "AGENT", "Be careful."),
                    _msg(2, "SYSTEM", "USER", f"{INSTRUCTION}few shot", ["USER"]),
                    _msg(3, "USER", "AGENT", "hi", ["USER"]),
                    _msg(4, "SYSTEM", "USER", prompt),
                    _msg(5, "USER", "AGENT", "How long till Christmas?")],
        "first_user_sandbox_message_index": 5,
        "world": {"SETTING": [{"wifi": True}], "CONTACT": [], "MESSAGING": [],
                  "REMINDER": [{"reminder_timestamp": _ts(clock, seconds=-60)}]},
        "milestones": [milestone], "milestone_edges": [], "milestone_edges_declared": None,
        "minefields": [], "minefield_edges": [], "minefield_edges_declared": None,
        "distraction_tool_ranking": [f"tool_{i}" for i in range(12)]}]}


# --------------------------------------------------------------------------- serialization helpers


def test_records_follow_the_data_folder_format():
    (rec,) = ex.build_records(fake_build(ex.REFERENCE_CLOCK), {"demo": 0.5})
    assert list(rec)[:4] == ["name", "source", "categories", "base_world"]
    assert rec["categories"] == ["SINGLE_TOOL_CALL", "NO_DISTRACTION_TOOLS"]
    assert rec["agent_system_prompt"] == "Be careful."
    assert rec["user_simulator_task"] == "Christmas is 12/25/2025."
    assert rec["first_user_messages"] == ["How long till Christmas?"]
    assert rec["user_simulator_few_shot"] == [{"sender": "SYSTEM", "recipient": "USER", "content": f"{INSTRUCTION}few shot"},
                                              {"sender": "USER", "recipient": "AGENT", "content": "hi"}]
    c0, c1, c2 = rec["milestones"][0]["constraints"]
    assert c0["similarity"] == "snapshot" and isinstance(c0["target_rows"][0]["tool_trace"], list)  # alternatives
    assert c0["column_similarity"] == {"tool_trace": {"kind": "tool_trace", "atol_dict": {"latitude": 0.5}}}
    assert c1["column_similarity"]["reminder_timestamp"] == {"kind": "close", "atol_dict": {"reminder_timestamp": 1}}
    assert c2["similarity"] == "tool_trace_dependant"
    assert c2["tool_trace_dependant"]["extractor"]["outputs"] == [{"key": "days", "path": ["result", "days"], "cast": "int"}]
    assert rec["augmentations"]["variants"]["3_distraction_tools"] == ["tool_0", "tool_1", "tool_2"]
    assert rec["oracle_similarity"] == 0.5


def test_unknown_upstream_callables_are_refused():
    doc = fake_build(ex.REFERENCE_CLOCK)
    doc["scenarios"][0]["milestones"][0]["constraints"][0]["similarity"] = _fn("my_similarity")
    with pytest.raises(DataFetchError, match="unknown snapshot similarity"):
        ex.build_records(doc)
    doc = fake_build(ex.REFERENCE_CLOCK)
    doc["scenarios"][0]["milestones"][0]["constraints"][2]["similarity"]["keywords"]["extractor"]["name"] = "new"
    with pytest.raises(DataFetchError, match="extractor"):
        ex.build_records(doc)


def test_time_dependent_values_explain_every_clock_change():
    builds = [ex.build_records(fake_build(c))[0] for c in CLOCKS]
    got = {t["path"]: t["expr"] for t in ex.time_dependent_values(builds, CLOCKS)}
    assert got == {
        "/user_simulator_system_prompt": {"kind": "text_with_year", "template": f"{INSTRUCTION}Christmas is 12/25/{{year}}."},
        "/user_simulator_task": {"kind": "text_with_year", "template": "Christmas is 12/25/{year}."},
        "/sandbox/4/content": {"kind": "text_with_year", "template": f"{INSTRUCTION}Christmas is 12/25/{{year}}."},
        "/world/REMINDER/0/reminder_timestamp": {"kind": "now_offset", "seconds": -60.0},
        "/milestones/0/constraints/0/target_rows/0/tool_trace/0/arguments/year": {"kind": "current_year"},
        "/milestones/0/constraints/1/target_rows/0/reminder_timestamp":
            {"kind": "local_day_at", "days": 1, "time_of_day": "17:00:00"},
    }


def test_next_weekday_and_unexplained_changes():
    stamps = [dt.datetime.fromisoformat(c) for c in CLOCKS]
    fridays = []
    for now in stamps:
        day = now + dt.timedelta(days=(5 - now.isoweekday()) % 7)
        fridays.append(day.replace(hour=17, minute=0, second=0).replace(tzinfo=dt.UTC).timestamp())
    assert ex._explain(fridays, stamps) == {"kind": "next_isoweekday_at", "isoweekday": 5, "time_of_day": "17:00:00"}
    builds = [{"name": "x", "v": v} for v in (1.0, 7.0, 3.0)]
    with pytest.raises(DataFetchError, match="cannot describe"):
        ex.time_dependent_values(builds, CLOCKS)


def test_rendering_is_deterministic():
    docs = [fake_build(c) for c in CLOCKS]
    a = ex.render_scenarios(docs, CLOCKS)
    b = ex.render_scenarios(copy.deepcopy(docs), CLOCKS)
    assert a == b and a.endswith(b"}\n") and a.count(b"\n") == 1


def test_upstream_sources_are_told_apart_from_data_folders(tmp_path):
    src = _fake_checkout(tmp_path / "ToolSandbox-x")
    assert ex.is_upstream_source(tmp_path) and ex.is_upstream_source(src)
    assert ex.is_upstream_source(_tar(src, tmp_path / "up.tar.gz"))
    data = tmp_path / "data"
    (data / "scenarios").mkdir(parents=True)
    assert not ex.is_upstream_source(data)


# --------------------------------------------------------------------------- fetch wiring (upstream's run faked)


def _fake_checkout(root: Path) -> Path:
    (root / "tool_sandbox" / "scenarios").mkdir(parents=True)
    (root / "tool_sandbox" / "scenarios" / "__init__.py").write_text("")
    (root / "pyproject.toml").write_text('[project]\nname = "tool_sandbox"\ndependencies = ["polars==0.20.31"]\n')
    (root / "LICENSE").write_text("Copyright (C) 2024 Apple Inc.\n")
    return root


def _tar(folder: Path, dest: Path) -> Path:
    with tarfile.open(dest, "w:gz") as tf:
        tf.add(folder, arcname=folder.name)
    return dest


@pytest.fixture
def faked_upstream(tmp_path, monkeypatch):
    """Upstream's run replaced by canned builds, and a manifest whose checksums are those of their export."""
    monkeypatch.setenv("TRACE_GYM_CACHE_DIR", str(tmp_path / "cache"))
    calls = []

    def fake_venv(root, log, parent):
        calls.append(root)
        return Path("/nonexistent/python")

    monkeypatch.setattr(ex, "_venv", fake_venv)
    monkeypatch.setattr(ex, "_build", lambda exe, root, clocks, work, log: [fake_build(c) for c in clocks])
    scenarios = ex.render_scenarios([fake_build(c) for c in CLOCKS], CLOCKS, ex.ORACLE_SIMILARITY)
    real = datafetch.load_manifest
    manifest = json.loads(json.dumps(real("toolsandbox")))
    for rel, data in ((ex.SCENARIOS, scenarios), ("LICENSE", b"Copyright (C) 2024 Apple Inc.\n")):
        manifest["files"][rel].update(sha256=hashlib.sha256(data).hexdigest(), size=len(data))
    use_manifest(monkeypatch, "toolsandbox", manifest)
    return calls


@pytest.fixture
def loopback(monkeypatch):
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    servers = []

    def serve(folder: Path) -> str:
        handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
        handler.log_message = lambda *a, **k: None  # type: ignore[method-assign]
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield serve
    for s in servers:
        s.shutdown()
        s.server_close()


def test_default_fetch_downloads_the_pinned_archive_once(tmp_path, faked_upstream, loopback, monkeypatch, capsys):
    served = tmp_path / "served"
    archive = _tar(_fake_checkout(tmp_path / "up" / f"ToolSandbox-{ex.PINNED_COMMIT}"), tmp_path / "a.tar.gz")
    (served / "apple" / "ToolSandbox" / "tar.gz").mkdir(parents=True)
    archive.rename(served / "apple" / "ToolSandbox" / "tar.gz" / ex.PINNED_COMMIT)
    monkeypatch.setattr(ex, "ARCHIVE_URL", loopback(served) + "/apple/ToolSandbox/tar.gz/{commit}")
    dest = tmp_path / "dest"
    assert main(["data", "fetch", "toolsandbox", "--dest", str(dest)]) == 0
    out, err = capsys.readouterr()
    assert "[1/4] upstream source: downloading" in err and "[4/4] serializing 1 scenarios" in err
    assert "tools.json (REQUIRED by the engine)" in out and "--from PATH_OR_URL" in out
    check = verify_folder("toolsandbox", dest)
    assert sorted(check["ok"]) == ["LICENSE", ex.SCENARIOS] and check["missing_required"] == ["tools.json"]
    (served / "apple" / "ToolSandbox" / "tar.gz" / ex.PINNED_COMMIT).unlink()  # a rerun needs no network
    result = fetch("toolsandbox", None, dest=dest, log=lambda m: None)
    assert result["derived"] == ["LICENSE", ex.SCENARIOS] and len(faked_upstream) == 2
    assert not [p for p in dest.parent.iterdir() if ".partial-" in p.name]


def test_fetch_from_an_archive_url_keeps_verified_files_already_there(tmp_path, faked_upstream, loopback):
    archive = _tar(_fake_checkout(tmp_path / "up" / "ToolSandbox-main"), tmp_path / "upstream.tar.gz")
    dest = tmp_path / "dest"
    dest.mkdir()
    tools = datafetch.load_manifest("toolsandbox")["files"]["tools.json"]
    (dest / "tools.json").write_text("not the real tools.json")  # fails its checksum: not kept
    result = fetch("toolsandbox", f"{loopback(tmp_path)}/{archive.name}", dest=dest, log=lambda m: None)
    assert result["kept"] == [] and "tools.json" in result["not_in_source"] and tools["required"]
    marker = json.loads((dest / datafetch.MARKER).read_text())
    assert marker["source"].endswith("upstream.tar.gz") or marker["source"].endswith("download")


def test_an_export_that_differs_from_the_checksums_installs_nothing(tmp_path, faked_upstream, monkeypatch):
    monkeypatch.setattr(ex, "ORACLE_SIMILARITY", {"demo": 0.25})
    dest = tmp_path / "dest"
    with pytest.raises(DataFetchError, match="differs from the checksum"):
        fetch("toolsandbox", str(_fake_checkout(tmp_path / "checkout")), dest=dest, log=lambda m: None)
    assert not dest.exists() and not [p for p in tmp_path.iterdir() if ".partial-" in p.name]


def test_a_folder_that_is_not_upstream_is_not_exported(tmp_path, faked_upstream):
    (tmp_path / "empty").mkdir()  # read as a (here empty) data folder, never run
    result = fetch("toolsandbox", str(tmp_path / "empty"), dest=tmp_path / "dest", log=lambda m: None)
    assert faked_upstream == [] and result["files"] == 0


# --------------------------------------------------------------------------- the real upstream (gated)


@pytest.mark.slow
def test_export_from_upstream_matches_the_shipped_checksums(tmp_path, monkeypatch):
    src = os.environ.get(ex.SRC_ENV)
    if not src:
        pytest.skip(f"set {ex.SRC_ENV} to a checkout or archive of apple/ToolSandbox at {ex.PINNED_COMMIT[:12]} "
                    "to run upstream's code (needs Python 3.11 and PyPI for the private venv)")
    venvs = Path(os.environ.get("TRACE_GYM_TOOLSANDBOX_VENVS") or tmp_path / "venvs")
    monkeypatch.setenv("TRACE_GYM_CACHE_DIR", str(tmp_path / "cache"))
    first = ex.export(src, lambda m: None, venv_parent=venvs)
    second = ex.export(src, lambda m: None, venv_parent=venvs)
    assert first == second  # deterministic
    manifest = datafetch.load_manifest("toolsandbox")
    for rel, data in first.items():
        assert hashlib.sha256(data).hexdigest() == manifest["files"][rel]["sha256"], rel  # byte for byte
    assert sorted(first) == sorted(ex.DERIVED)
