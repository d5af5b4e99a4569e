"""The integrations are optional extras: ``import trace_gym`` imports none of them, and a missing package is
one line naming the extra that installs it (for the library and for ``trace-gym serve``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXTRAS = {"openenv": "openenv", "verifiers": "verifiers", "skyrl": "skyrl_gym"}


def test_import_trace_gym_imports_no_integration():
    code = ("import sys, trace_gym, gymnasium as gym; gym.make('trace/cap-refund-policy-v0', disable_env_checker=True);"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in {'openenv', 'verifiers', 'skyrl_gym', 'trl'}"
            " or m.startswith('trace_gym.integrations')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_a_missing_integration_package_is_one_line_naming_its_extra(extra, monkeypatch):
    from trace_gym.integrations import MissingExtraError

    module = EXTRAS[extra]
    monkeypatch.setitem(sys.modules, module, None)  # as if not installed
    monkeypatch.delitem(sys.modules, f"trace_gym.integrations.{extra}", raising=False)
    with pytest.raises(MissingExtraError) as exc:
        __import__(f"trace_gym.integrations.{extra}")
    assert str(exc.value) == f"{module} is not installed: pip install 'trace-gym[{extra}]'"


def test_serve_without_openenv_is_one_line_naming_the_extra(monkeypatch, capsys):
    from trace_gym.cli import main

    monkeypatch.setitem(sys.modules, "openenv", None)
    monkeypatch.delitem(sys.modules, "trace_gym.integrations.openenv", raising=False)
    assert main(["serve", "trace/cap-refund-policy-v0", "--port", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: openenv is not installed: pip install 'trace-gym[openenv]'"]


def test_serve_refuses_bad_arguments_before_serving(capsys):
    from trace_gym.cli import main

    assert main(["serve", "trace/cap-refund-policy-v0", "--port", "70000"]) == 2
    assert main(["serve", "trace/cap-refund-policy-v0", "--env-kwargs", "[1]"]) == 2
    assert "--port" in capsys.readouterr().err
    for bad in ("-1", "nan", "inf"):
        assert main(["serve", "trace/cap-refund-policy-v0", "--idle-timeout", bad]) == 2
        assert "--idle-timeout must be a number of seconds >= 0" in capsys.readouterr().err
