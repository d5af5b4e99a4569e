"""``trace-gym data``: checksums, status and an offline fetch (local archive and loopback HTTP).

The archive is built in a temporary folder from the sibling data folder, laid out like
tau2-bench's source archive (``tau2-bench-1.0.1/data/tau2/...``).  Nothing here contacts the
internet: the HTTP server listens on 127.0.0.1 only.
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import shutil
import tarfile
import threading
import zipfile
from pathlib import Path

import pytest

from tests.corpora import complete_copy
from tests.datafetch_fake_tau2 import FILES, UPSTREAM_ENV, reader, upstream_source, use_manifest, write_tree
from trace_gym import data as datafetch
from trace_gym.cli import main
from trace_gym.data import (
    DataDirError,
    DataFetchError,
    fetch,
    load_manifest,
    locate,
    packaged_files,
    packaged_root,
    tau2_data_dir,
    toolsandbox_data_dir,
    verify_folder,
)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private per-user cache; the sibling folder is hidden by pointing the env vars elsewhere."""
    root = tmp_path / "cache"
    monkeypatch.setenv("TRACE_GYM_CACHE_DIR", str(root))
    return root


def _upstream_like_archive(data_root: Path, dest: Path, *, corrupt: str | None = None,
                           code: dict[str, str] | str | None = None) -> Path:
    """A .tar.gz laid out like tau2-bench's source archive, holding only what upstream ships: the data
    files, and (``code``) Python source: a dict of repository path -> text, or upstream's own source
    (a checkout or archive, whose ``src/`` is copied)."""
    manifest = load_manifest("tau2")
    top = dest / "src" / "tau2-bench-1.0.1"
    if isinstance(code, dict):
        write_tree(top, code)
    elif code is not None:
        _copy_upstream_code(code, top)
    for rel, entry in manifest["files"].items():
        if entry["source"] is None:  # generated files are not in upstream's archive
            continue
        target = top / ("LICENSE" if rel == "LICENSE" else f"data/tau2/{rel}")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(data_root / "tau2" / rel, target)
    (top / "data" / "tau2" / "domains" / "retail" / "audio_difficulty.json").write_text("{}")  # unrelated upstream file
    if corrupt is not None:
        path = top / "data" / "tau2" / corrupt
        raw = bytearray(path.read_bytes())
        raw[len(raw) // 2] ^= 0x01
        path.write_bytes(bytes(raw))
    archive = dest / ("corrupt.tar.gz" if corrupt else "tau2-bench-1.0.1.tar.gz")
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(top, arcname="tau2-bench-1.0.1")
    return archive


def _copy_upstream_code(source: str, top: Path) -> None:
    path = Path(source).expanduser()
    if path.is_dir():
        roots = [p for p in (path, *sorted(path.iterdir())) if (p / "src" / "tau2").is_dir()]
        shutil.copytree(roots[0] / "src", top / "src", dirs_exist_ok=True)
        return
    with tarfile.open(path) as tf:
        for m in tf.getmembers():
            parts = m.name.split("/")
            if m.isfile() and "src" in parts and m.name.endswith(".py"):
                rel = "/".join(parts[parts.index("src"):])
                (top / rel).parent.mkdir(parents=True, exist_ok=True)
                (top / rel).write_bytes(tf.extractfile(m).read())


@pytest.fixture
def loopback_server(monkeypatch):
    """Serve a folder on 127.0.0.1 (an ephemeral port) for the length of one test."""
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)  # loopback only, never through a proxy
    servers = []

    def serve(folder: Path) -> str:
        handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
        handler.log_message = lambda *a, **k: None  # type: ignore[method-assign]
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.timeout = 10
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield serve
    for s in servers:
        s.shutdown()
        s.server_close()


def test_manifests_have_checksums_only():
    for bench in ("tau2", "toolsandbox"):
        m = load_manifest(bench)
        assert m["files"] and all(len(e["sha256"]) == 64 and e["size"] > 0 for e in m["files"].values())
    tau2 = load_manifest("tau2")
    assert tau2["version"] == "1.0.1"
    assert tau2["files"]["domains/airline/db.json"]["source"] == {"tag": "v1.0.1", "path": "data/tau2/domains/airline/db.json"}
    assert tau2["files"]["domains/airline/tools.json"]["source"] is None  # not a file in the archive ...
    assert tau2["files"]["domains/airline/tools.json"]["derive"] == {"tag": "v1.0.1", "domain": "airline"}  # derived
    shipped = Path(__file__).resolve().parent.parent / "trace_gym" / "data" / "checksums"
    assert sorted(p.name for p in shipped.iterdir()) == ["tau2.json", "toolsandbox.json"]


def test_status_finds_the_data_and_it_verifies(tau2_data, capsys):
    check = verify_folder("tau2", tau2_data)
    assert check["complete"] and not check["mismatch"]
    assert main(["data", "status"]) == 0
    out = capsys.readouterr().out
    assert "τ²-bench" in out and "version: 1.0.1" in out and "ToolSandbox" in out


@pytest.mark.parametrize("benchmark", ["tau2", "toolsandbox"])
def test_the_packaged_copy_is_exactly_the_engine_files_and_licence_and_verifies(benchmark):
    manifest = load_manifest(benchmark)
    root = packaged_root() / benchmark
    shipped = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    assert shipped == packaged_files(manifest)
    assert "LICENSE" in shipped and all(manifest["files"][r]["required"] for r in shipped if r != "LICENSE")
    assert [r for r, e in manifest["files"].items() if e["required"] and r not in shipped] == []
    check = verify_folder(benchmark, packaged_root() if manifest["files_under"] else root)
    assert check["complete"] and not check["mismatch"] and sorted(check["ok"]) == shipped
    assert not [r for r in shipped if r.startswith("conformance/") or r == "EVALUATION.md"]


def test_lookup_order_variable_cache_packaged_sibling(tmp_path, monkeypatch, capsys):
    """The data variable, then the cache, then the packaged copy, then ../shared; status names the one used."""
    monkeypatch.setenv("TRACE_GYM_CACHE_DIR", str(tmp_path / "cache"))
    for var in ("TAU2_DATA_DIR", "TOOLSANDBOX_DATA_DIR"):
        monkeypatch.delenv(var, raising=False)
    for bench in ("tau2", "toolsandbox"):
        found, tried = locate(bench)
        assert found.how == "packaged" and found.path == (packaged_root() if bench == "tau2" else packaged_root() / bench)
        assert tried[0] == str(tmp_path / "cache" / "data" / ("tau2-1.0.1" if bench == "tau2" else "toolsandbox"))
    assert main(["data", "status"]) == 0
    assert capsys.readouterr().out.count("(the copy packaged with trace-gym)") == 2
    # a copy in the cache comes first
    cached = tmp_path / "cache" / "data" / "toolsandbox"
    shutil.copytree(packaged_root() / "toolsandbox", cached)
    assert locate("toolsandbox")[0].how == "cache" and toolsandbox_data_dir() == cached
    # the variable comes first of all
    monkeypatch.setenv("TOOLSANDBOX_DATA_DIR", str(packaged_root() / "toolsandbox"))
    assert locate("toolsandbox")[0].how == "env"
    # without a packaged copy (a source checkout stripped of it), the development ../shared is found
    monkeypatch.delenv("TOOLSANDBOX_DATA_DIR")
    shutil.rmtree(cached)
    from trace_gym.data import locations as locate_module

    monkeypatch.setattr(locate_module, "packaged_root", lambda: tmp_path / "no-package-data")
    shared = tmp_path / "checkout" / "shared"
    shutil.copytree(packaged_root() / "toolsandbox", shared / "toolsandbox")
    monkeypatch.chdir(tmp_path / "checkout")
    found, tried = locate("toolsandbox")
    beside_checkout = Path(__file__).resolve().parents[1].parent / "shared" / "toolsandbox"  # looked at first
    assert found.how == "sibling"
    assert found.path == (beside_checkout if beside_checkout.is_dir() else shared / "toolsandbox")
    assert str(tmp_path / "no-package-data" / "toolsandbox") in tried


def test_status_without_data_names_the_verb(tmp_path, monkeypatch, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("TAU2_DATA_DIR", str(empty))
    monkeypatch.setenv("TOOLSANDBOX_DATA_DIR", str(empty))
    assert main(["data", "status", "--json"]) == 0
    docs = json.loads(capsys.readouterr().out)
    assert [d["found"] for d in docs] == [False, False]
    # an explicitly set variable wins: no fall-back to the sibling folder or the cache
    with pytest.raises(DataDirError, match="trace-gym data fetch tau2"):
        tau2_data_dir()
    with pytest.raises(DataDirError, match="trace-gym data fetch toolsandbox"):
        toolsandbox_data_dir()


@pytest.fixture(scope="module")
def tau2_full():
    """A complete τ²-bench data folder (upstream's files beyond the packaged ones, for archives like upstream's)."""
    return complete_copy("tau2")


@pytest.fixture(scope="module")
def toolsandbox_full():
    """A complete ToolSandbox data folder (with the corpora the package does not ship)."""
    return complete_copy("toolsandbox")


def test_fetch_from_a_local_archive_verifies_and_is_found_afterwards(tau2_full, tmp_path, cache, monkeypatch, capsys):
    archive = _upstream_like_archive(tau2_full, tmp_path)
    assert main(["data", "fetch", "tau2", "--from", str(archive)]) == 0
    out = capsys.readouterr().out
    assert "verified files" in out and "tools.json" in out  # says which generated files the source lacked
    installed = cache / "data" / "tau2-1.0.1"
    manifest = load_manifest("tau2")
    packaged = packaged_files(manifest)
    copied = [r for r in packaged if not manifest["files"][r].get("derive")]  # the schemas come from code only
    assert f"byte-identical to the packaged copy: {len(copied)} of {len(packaged)} packaged files" in out
    assert "not installed: domains/airline/tools.json" in out
    check = verify_folder("tau2", installed)
    upstream = {r for r, e in manifest["files"].items() if e["source"]}
    assert set(check["ok"]) == upstream and not check["mismatch"]
    # the telecom split file upstream keeps more splits; the fetched one is the verified subset
    assert set(json.loads((installed / "tau2/domains/telecom/split_tasks.json").read_text())) == {"base", "train", "test"}
    monkeypatch.delenv("TAU2_DATA_DIR", raising=False)
    found, _ = locate("tau2")
    assert found is not None and found.how == "cache" and found.path == installed
    assert main(["data", "status"]) == 0
    out = capsys.readouterr().out
    assert str(installed) in out and "version: 1.0.1" in out and "missing files the engine reads" in out
    assert not list(installed.parent.glob(".*partial*"))


def test_fetch_over_loopback_http(tau2_full, tmp_path, cache, loopback_server):
    archive = _upstream_like_archive(tau2_full, tmp_path)
    url = f"{loopback_server(archive.parent)}/{archive.name}"
    result = fetch("tau2", url, log=lambda _m: None)
    assert Path(result["path"]) == cache / "data" / "tau2-1.0.1"
    assert verify_folder("tau2", Path(result["path"]))["mismatch"] == []
    # a zip of a complete data folder (a mirror), over HTTP too: every file, generated ones included
    mirror = tmp_path / "mirror.zip"
    with zipfile.ZipFile(mirror, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted((tau2_full / "tau2").rglob("*")):
            if path.is_file():
                zf.write(path, f"tau2-data/tau2/{path.relative_to(tau2_full / 'tau2').as_posix()}")
    result = fetch("tau2", f"{loopback_server(tmp_path)}/mirror.zip", log=lambda _m: None)
    assert result["not_in_source"] == [] and verify_folder("tau2", Path(result["path"]))["complete"]


def _archive(top: Path, dest: Path) -> Path:
    with tarfile.open(dest, "w:gz") as tf:
        tf.add(top, arcname=top.name)
    return dest


def test_fetch_from_a_mirror_of_both_upstream_tags(tau2_full, tmp_path, cache, loopback_server):
    """The default path: tag v1.0.1's archive has a different telecom tasks file (every generated task)
    and more splits, in upstream's order; the base tasks come from tag v0.2.0's archive."""
    manifest = load_manifest("tau2")
    assert {e["source"]["tag"] for e in manifest["files"].values() if e["source"]} == {"v1.0.1", "v0.2.0"}
    v101 = tmp_path / "src" / "tau2-bench-1.0.1"
    for rel, entry in manifest["files"].items():
        if entry["source"] and entry["source"]["tag"] == "v1.0.1":
            target = v101 / entry["source"]["path"]
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(tau2_full / "tau2" / rel, target)
    telecom = v101 / "data/tau2/domains/telecom"
    base = json.loads((tau2_full / "tau2/domains/telecom/split_tasks.json").read_text())
    upstream_splits = {"small": base["test"][:3], "train": base["train"], "test": base["test"], "full": base["base"] * 2,
                       "base": base["base"]}
    (telecom / "split_tasks.json").write_text(json.dumps(upstream_splits, indent=4) + "\n")
    (telecom / "tasks.json").write_text(json.dumps([{"id": "every generated task"}]))
    v020 = tmp_path / "src" / "tau2-bench-0.2.0"
    (v020 / "data/tau2/domains/telecom").mkdir(parents=True)
    shutil.copyfile(tau2_full / "tau2/domains/telecom/tasks.json", v020 / "data/tau2/domains/telecom/tasks.json")
    (v020 / "data/tau2/domains/airline").mkdir(parents=True)
    (v020 / "data/tau2/domains/airline/db.json").write_text("{}")  # an older file the fetch must not take
    served = tmp_path / "served" / "tau2-bench"
    served.mkdir(parents=True)
    _archive(v101, served / "v1.0.1.tar.gz")
    _archive(v020, served / "v0.2.0.tar.gz")
    result = fetch("tau2", f"{loopback_server(served.parent)}/tau2-bench/{{tag}}.tar.gz", log=lambda _m: None)
    check = verify_folder("tau2", Path(result["path"]))
    assert set(check["ok"]) == {r for r, e in manifest["files"].items() if e["source"]} and not check["mismatch"]


def test_a_complete_mirror_folder_gives_a_complete_copy(tau2_full, tmp_path, cache):
    result = fetch("tau2", str(tau2_full), dest=tmp_path / "copy", log=lambda _m: None)
    assert result["not_in_source"] == []
    assert verify_folder("tau2", tmp_path / "copy")["complete"]


def test_a_corrupted_file_fails_and_leaves_nothing(tau2_full, tmp_path, cache, loopback_server):
    bad = _upstream_like_archive(tau2_full, tmp_path, corrupt="domains/retail/tasks.json")
    with pytest.raises(DataFetchError, match=r"domains/retail/tasks\.json.*(corrupted|mismatch)"):
        fetch("tau2", str(bad), log=lambda _m: None)
    assert not (cache / "data" / "tau2-1.0.1").exists()
    assert list((cache / "data").iterdir()) == []  # no staging folder left behind
    # the same over HTTP, through the CLI: one error line, exit 1, an older good copy untouched
    good = fetch("tau2", str(_upstream_like_archive(tau2_full, tmp_path / "g")), log=lambda _m: None)
    before = verify_folder("tau2", Path(good["path"]))["ok"]
    url = f"{loopback_server(bad.parent)}/{bad.name}"
    assert main(["data", "fetch", "tau2", "--from", url]) == 1
    assert verify_folder("tau2", Path(good["path"]))["ok"] == before
    assert [p.name for p in (cache / "data").iterdir()] == ["tau2-1.0.1"]


def test_fetch_errors_are_one_line(tmp_path, cache, capsys, monkeypatch):
    assert main(["data", "fetch", "tau2", "--from", str(tmp_path / "nope.tar.gz")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no such file" in err[0]
    assert not cache.exists()  # a missing source fails before anything is created
    (tmp_path / "junk.tar.gz").write_bytes(b"not an archive")
    assert main(["data", "fetch", "tau2", "--from", str(tmp_path / "junk.tar.gz")]) == 1
    assert "archive" in capsys.readouterr().err
    from trace_gym.data import toolsandbox_export as export

    monkeypatch.setattr(export, "ARCHIVE_URL", "http://127.0.0.1:9/{commit}.tar.gz")  # no network: nothing listens
    assert main(["data", "fetch", "toolsandbox"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err and err[-1].startswith("error:") and "--from" in err[-1]


def test_toolsandbox_from_a_folder(toolsandbox_full, tmp_path, cache):
    result = fetch("toolsandbox", str(toolsandbox_full), log=lambda _m: None)
    assert verify_folder("toolsandbox", Path(result["path"]))["complete"]


# --------------------------------------------------------------------------- tool schemas derived from the code


def _stand_in_manifest(monkeypatch) -> dict:
    """The real manifest, with the mock domain's tool-schema checksums those of the test stand-in's code."""
    from trace_gym.data.tau2_schema_derive import derive_domain

    real = datafetch.load_manifest
    out, _ = derive_domain(reader(FILES), "mock", ["tools.json", "user_tools.json"])
    manifest = json.loads(json.dumps(real("tau2")))
    for name, data in out.items():
        manifest["files"][f"domains/mock/{name}"].update(sha256=hashlib.sha256(data).hexdigest(), size=len(data))
    use_manifest(monkeypatch, "tau2", manifest)
    return {f"domains/mock/{n}": d for n, d in out.items()}


def test_fetch_derives_tool_schemas_from_the_archives_code(tau2_full, tmp_path, cache, monkeypatch, capsys):
    expected = _stand_in_manifest(monkeypatch)
    archive = _upstream_like_archive(tau2_full, tmp_path, code=FILES)
    assert main(["data", "fetch", "tau2", "--from", str(archive)]) == 0
    out = capsys.readouterr().out
    assert "derived 2 of them from the source's Python code" in out and "domains/mock/user_tools.json" in out
    installed = cache / "data" / "tau2-1.0.1"
    for rel, data in expected.items():
        assert (installed / "tau2" / rel).read_bytes() == data
    marker = json.loads((installed / ".trace-gym-data.json").read_text())
    assert marker["derived"]["domains/mock/tools.json"][0] == "src/tau2/domains/mock/tools.py"
    # domains without code in this archive keep their schemas missing, and the note says why
    assert "domains/airline/tools.json" in marker["not_in_source"] and "Python source" in out
    monkeypatch.delenv("TAU2_DATA_DIR", raising=False)
    assert main(["data", "status", "--json"]) == 0
    [doc] = [d for d in json.loads(capsys.readouterr().out) if d["benchmark"] == "tau2"]
    assert doc["derived"] == sorted(expected) and "domains/airline/tools.json" in doc["missing_required"]
    assert main(["data", "status"]) == 0
    text = capsys.readouterr().out
    assert "derived at fetch time from τ²-bench's Python source: 2 tool-schema files" in text
    assert "tool schemas missing" in text
    # a derived file edited afterwards is reported like any other
    (installed / "tau2/domains/mock/tools.json").write_text("[]\n")
    assert datafetch.status("tau2")["mismatch"] == ["domains/mock/tools.json"]


def test_derived_schemas_that_differ_fail_and_leave_nothing(tau2_full, tmp_path, cache):
    """The stand-in's code is not tau2 1.0.1's: what it yields differs from the shipped checksums."""
    archive = _upstream_like_archive(tau2_full, tmp_path, code=FILES)
    with pytest.raises(DataFetchError, match=r"domains/mock/tools\.json: derived from the Python code, but the result "
                                             r"differs from the checksum"):
        fetch("tau2", str(archive), log=lambda _m: None)
    assert not (cache / "data").exists() or list((cache / "data").iterdir()) == []
    broken = {**FILES, "src/tau2/domains/mock/tools.py": FILES["src/tau2/domains/mock/tools.py"].replace(
        "from tau2.domains.mock.data_model", "from tau2.domains.mock.gone")}
    archive = _upstream_like_archive(tau2_full, tmp_path / "b", code=broken)
    with pytest.raises(DataFetchError, match=r"cannot derive it from the Python code .*gone\.py: not in the source"):
        fetch("tau2", str(archive), log=lambda _m: None)


def test_fetch_with_upstream_code_gives_every_file_the_engine_reads(tau2_full, tmp_path, cache, loopback_server):
    """Upstream's own code (not part of this repository): set TAU2_BENCH_SOURCE to run this."""
    source = upstream_source()
    if source is None:
        pytest.skip(f"set {UPSTREAM_ENV} to a tau2-bench v1.0.1 checkout or source archive")
    archive = _upstream_like_archive(tau2_full, tmp_path, code=source)
    result = fetch("tau2", f"{loopback_server(archive.parent)}/{archive.name}", log=lambda _m: None)
    manifest = load_manifest("tau2")
    assert result["derived"] == sorted(r for r, e in manifest["files"].items() if e.get("derive"))
    check = verify_folder("tau2", Path(result["path"]))
    assert check["complete"] and not check["missing_required"] and not check["mismatch"]
    for rel in result["derived"]:
        assert (Path(result["path"]) / "tau2" / rel).read_bytes() == (tau2_full / "tau2" / rel).read_bytes()
