"""The adapters folder and its manifest: one owner module, validated reads, locked atomic writes."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
from pathlib import Path

import pytest

from trace_gym.adapters import (
    DEFAULT_ADAPTERS_DIR,
    ENTRY_FIELDS,
    MANIFEST_NAME,
    ManifestError,
    load_adapters,
    manifest_path,
    read_manifest,
    update_manifest,
)
from trace_gym.route.registry import AdapterRegistry

ROOT = Path(__file__).resolve().parents[1]


def _entry(name: str, path: str, **extra) -> dict:
    return {"name": name, "path": path, "capability": "cap", "env_id": "trace/cap-x-v0", "base_model": "tiny", "steps": 2,
            "rollouts_used": 8, "reward_curve": [[1, 0.25], [2, 0.5]], "created": "2026-01-01T00:00:00Z", **extra}


def test_update_replaces_an_entry_by_path_and_read_validates(tmp_path):
    m = tmp_path / "adapters" / MANIFEST_NAME
    update_manifest(m, _entry("a", "adapters/a"))
    update_manifest(m, _entry("b", "adapters/b"))
    update_manifest(m, _entry("a2", "adapters/a", steps=5))
    data = read_manifest(m)
    assert [(e["name"], e["steps"]) for e in data["adapters"]] == [("b", 2), ("a2", 5)]
    assert read_manifest(tmp_path / "adapters") == data  # a folder names its manifest
    assert read_manifest(tmp_path / "none") == {"adapters": []}
    assert not list(m.parent.glob("*.tmp"))


@pytest.mark.parametrize("bad, fragment", [
    ("not json", "not valid JSON"),
    ('{"adapters": {}}', "an 'adapters' list"),
    ('{"adapters": [3]}', "adapters[0]: expected an object"),
    ('{"adapters": [{"path": "x"}]}', "missing 'name'"),
    ('{"adapters": [{"name": "x", "path": 3}]}', "adapters[0].path: expected a string"),
    ('{"adapters": [{"name": "x", "path": "x", "steps": -1}]}', "non-negative"),
    ('{"adapters": [{"name": "x", "path": "x", "steps": true}]}', "steps: expected an integer"),
    ('{"adapters": [{"name": "x", "path": "x", "reward_curve": [[1, NaN]]}]}', "reward_curve[0]"),
    ('{"adapters": [{"name": "x", "path": "p"}, {"name": "y", "path": "p"}]}', "listed twice"),
])
def test_a_malformed_manifest_names_the_file_and_the_field(tmp_path, bad, fragment):
    m = tmp_path / MANIFEST_NAME
    m.write_text(bad)
    with pytest.raises(ManifestError) as info:
        read_manifest(m)
    assert fragment in str(info.value) and str(m) in str(info.value)
    with pytest.raises(ManifestError):
        AdapterRegistry(m)


def test_an_invalid_entry_is_refused_before_anything_is_written(tmp_path):
    m = tmp_path / MANIFEST_NAME
    update_manifest(m, _entry("a", "a"))
    before = m.read_text()
    with pytest.raises(ManifestError, match="missing 'path'"):
        update_manifest(m, {"name": "b"})
    assert m.read_text() == before


def _writer(args):
    path, i = args
    update_manifest(path, _entry(f"n{i}", f"adapters/n{i}"))


def test_concurrent_writers_keep_every_entry(tmp_path):
    m = tmp_path / MANIFEST_NAME
    with multiprocessing.get_context("fork").Pool(4) as pool:
        pool.map(_writer, [(m, i) for i in range(16)])
    assert sorted(e["name"] for e in read_manifest(m)["adapters"]) == sorted(f"n{i}" for i in range(16))


def test_load_adapters_resolves_folders_next_to_the_manifest(tmp_path, monkeypatch):
    root = tmp_path / "elsewhere" / "adapters"
    (root / "a").mkdir(parents=True)
    update_manifest(root, _entry("a", "adapters/a"))
    monkeypatch.chdir(tmp_path)
    [a] = load_adapters(root)
    assert a.path == root / "a" and a.capability == "cap" and a.raw["steps"] == 2
    reg = AdapterRegistry(root)
    assert reg.names() == ["a"] and reg["a"].path == root / "a"
    with pytest.raises(FileNotFoundError, match="trace-gym train --out"):
        load_adapters(tmp_path / "nothing")


def test_the_default_folder_is_adapters_at_the_top_of_the_checkout():
    assert DEFAULT_ADAPTERS_DIR == "adapters"
    assert manifest_path() == Path("adapters") / MANIFEST_NAME
    folder = ROOT / DEFAULT_ADAPTERS_DIR
    readme = (folder / "README.md").read_text(encoding="utf-8")
    for name in ENTRY_FIELDS:  # every manifest field is documented
        assert f"`{name}`" in readme, name
    from trace_gym.cli import build_parser

    args = build_parser().parse_args(["eval", "--env", "trace/tau2-mock-v0", "--policy", "base"])
    assert args.adapters is None  # not given: a run's DIR/adapters, else the default folder
    from trace_gym.eval.policies import default_adapters

    assert default_adapters(None) == DEFAULT_ADAPTERS_DIR and default_adapters("x") == "x"


def test_the_folder_keeps_only_its_readme_and_gitignore_in_git(tmp_path):
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    names = ["adapters/manifest.json", "adapters/refund/adapter_model.safetensors", "adapters/router_index.npy",
             "adapters/README.md", "adapters/.gitignore"]
    out = subprocess.run(["git", "check-ignore", "--no-index", *names], cwd=ROOT, capture_output=True, text=True)
    assert out.stdout.split() == names[:3]
    json.loads(json.dumps(names))
