"""The built wheel works alone: installed (not editable) into a fresh venv outside the checkout, with no data
anywhere but the package, every registered env resets and steps and the tiny demo runs to its summary.

The fresh venv reuses this environment's installed dependencies (a ``.pth`` line to its site-packages), but
trace-gym itself comes only from the wheel built here from the sdist; the test checks that it is the wheel's
copy that runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

STEP_EVERY_ID = r"""
import json, sys
import gymnasium as gym
import trace_gym
from trace_gym.data import locate

assert trace_gym.__file__.startswith(sys.argv[1]), trace_gym.__file__
where = {b: locate(b)[0].how for b in ("tau2", "toolsandbox")}
ids = sorted(i for i in gym.registry if i.startswith("trace/"))
stepped = []
for env_id in ids:
    env = gym.make(env_id)
    obs, info = env.reset(seed=0)
    assert isinstance(obs, str) and obs, env_id
    obs, reward, terminated, truncated, info = env.step("Hello! How can I help you today?")
    assert isinstance(obs, str) and isinstance(reward, float), env_id
    env.close()
    stepped.append(env_id)
print(json.dumps({"where": where, "ids": ids, "stepped": stepped}))
"""


def _run(cmd: list[str], *, env: dict[str, str], cwd: Path, timeout: float) -> str:
    proc = subprocess.run([str(c) for c in cmd], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{cmd[:3]} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory):
    """``(python, bin folder, site-packages, clean env, work folder)`` of a fresh venv holding the built wheel."""
    tmp = tmp_path_factory.mktemp("wheel")
    dist = tmp / "dist"
    env = {k: v for k, v in os.environ.items()
           if k not in ("TAU2_DATA_DIR", "TOOLSANDBOX_DATA_DIR", "PYTHONPATH", "VIRTUAL_ENV")}
    env.update(TRACE_GYM_CACHE_DIR=str(tmp / "empty-cache"), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    # sdist first, then the wheel from the sdist: a file the sdist forgets is missing from the wheel too
    _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", dist, REPO], env=env, cwd=tmp, timeout=600)
    [wheel] = dist.glob("*.whl")
    assert len(list(dist.glob("*.tar.gz"))) == 1
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv], env=env, cwd=tmp, timeout=120)
    python = venv / "bin" / "python"
    site = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], env=env, cwd=tmp,
                     timeout=60).strip())
    (site / "_reuse_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "-q", wheel],
         env=env, cwd=tmp, timeout=300)
    work = tmp / "work"  # outside the checkout: no shared/ beside it or above it
    work.mkdir()
    return python, venv / "bin", site, env, work, wheel


def test_the_wheel_holds_the_package_data_and_no_tests(wheel_venv):
    *_, wheel = wheel_venv
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if n.startswith(("tests/", "benchmarks/", "scripts/", "examples/"))]
    for need in ("trace_gym/data/packaged/tau2/LICENSE", "trace_gym/data/packaged/tau2/domains/retail/db.json",
                 "trace_gym/data/packaged/tau2/domains/telecom/db.toml",
                 "trace_gym/data/packaged/toolsandbox/LICENSE", "trace_gym/data/packaged/toolsandbox/tools.json",
                 "trace_gym/data/packaged/toolsandbox/scenarios/base_scenarios.jsonl",
                 "trace_gym/data/checksums/tau2.json", "trace_gym/data/_toolsandbox_worker.py"):
        assert need in names, need
    assert not [n for n in names if "/conformance/" in n or n.endswith("EVALUATION.md")]
    meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(meta).decode()
    assert "License-Expression: MIT" in text
    import trace_gym

    assert f"\nVersion: {trace_gym.__version__}\n" in text


def test_every_env_resets_and_steps_from_the_wheel_alone(wheel_venv):
    python, bindir, site, env, work, _ = wheel_venv
    listed = [json.loads(line)["id"] for line in
              _run([bindir / "trace-gym", "envs", "--json"], env=env, cwd=work, timeout=300).splitlines()]
    doc = json.loads(_run([python, "-c", STEP_EVERY_ID, str(site)], env=env, cwd=work, timeout=900).splitlines()[-1])
    assert doc["where"] == {"tau2": "packaged", "toolsandbox": "packaged"}
    assert doc["stepped"] == doc["ids"] == sorted(listed)
    for must in ("trace/cap-refund-policy-v0", "trace/toolsandbox-v0", "trace/cap-ts-state-dependency-v0",
                 "trace/tau2-retail-v0"):
        assert must in doc["ids"]
    status = _run([bindir / "trace-gym", "data", "status"], env=env, cwd=work, timeout=300)
    assert status.count("copy packaged with trace-gym") == 2 and "complete: yes" in status


@pytest.mark.slow
def test_the_tiny_demo_runs_from_the_wheel(wheel_venv):
    python, bindir, site, env, work, _ = wheel_venv
    out = _run([bindir / "trace-gym", "demo", "--model", "tiny", "--out", work / "demo"], env=env, cwd=work,
               timeout=1200)
    summary = json.loads((work / "demo" / "summary.json").read_text())
    assert [s["stage"] for s in summary["stages"]][-1] == "evaluation", out[-2000:]
