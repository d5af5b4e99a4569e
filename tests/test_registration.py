"""Registration: one id, one source; the same source again is harmless, another source is refused by name."""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

import trace_gym
from trace_gym.registration import ENTRIES, DuplicateEnvError, EnvEntry, add_entry, list_envs, register_all, source_of

ROOT = Path(__file__).resolve().parents[1]
STARTER = ROOT / "envs" / "cap-refund-policy.yaml"


def test_importing_and_registering_again_is_idempotent():
    before = sorted(i for i in gym.registry if i.startswith("trace/"))
    register_all()
    importlib.reload(trace_gym)
    importlib.reload(importlib.import_module("trace_gym.capabilities.entries"))
    register_all()
    assert sorted(i for i in gym.registry if i.startswith("trace/")) == before
    assert [i for i, _ in list_envs()] == before
    env = gym.make("trace_gym:trace/tau2-mock-v0")  # gymnasium imports trace_gym again: no error
    env.close()


def test_the_same_entry_twice_and_the_same_spec_by_another_path_are_the_same_source(tmp_path):
    entry = EnvEntry("trace/cap-reg-test-same-v0", "trace_gym.capabilities.env:CapabilityEnv", "t", {"spec": str(STARTER)})
    try:
        add_entry(entry)
        add_entry(entry)
        link = tmp_path / "link.yaml"
        link.symlink_to(STARTER)
        add_entry(EnvEntry(entry.id, entry.entry_point, "t", {"spec": str(link)}))
        assert sum(e.id == entry.id for e in ENTRIES) == 1
    finally:
        gym.registry.pop(entry.id, None)
        ENTRIES[:] = [e for e in ENTRIES if e.id != entry.id]


def test_another_source_for_a_registered_id_is_refused_naming_both(tmp_path):
    other = tmp_path / "cap-refund-policy.yaml"
    shutil.copy(STARTER, other)
    with pytest.raises(DuplicateEnvError) as info:
        add_entry(EnvEntry("trace/cap-refund-policy-v0", "trace_gym.capabilities.env:CapabilityEnv", "mine", {"spec": str(other)}))
    msg = str(info.value)
    assert str(STARTER) in msg and str(other) in msg and "trace/cap-refund-policy-v0" in msg
    with pytest.raises(DuplicateEnvError, match="entry point some.module:Env"):
        add_entry(EnvEntry("trace/tau2-mock-v0", "some.module:Env", "x"))
    # a built-in id is never replaced, even when asked
    with pytest.raises(DuplicateEnvError):
        add_entry(EnvEntry("trace/cap-refund-policy-v0", "trace_gym.capabilities.env:CapabilityEnv", "mine",
                           {"spec": str(other)}), replace=True)
    assert source_of("trace/cap-refund-policy-v0") == f"spec file {STARTER}"


def test_a_program_may_replace_an_id_it_registered_itself(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    env_id = "trace/cap-reg-test-replace-v0"
    try:
        add_entry(EnvEntry(env_id, "trace_gym.capabilities.env:CapabilityEnv", "t", {"spec": str(a / "x.yaml")}))
        with pytest.raises(DuplicateEnvError):
            add_entry(EnvEntry(env_id, "trace_gym.capabilities.env:CapabilityEnv", "t", {"spec": str(b / "x.yaml")}))
        add_entry(EnvEntry(env_id, "trace_gym.capabilities.env:CapabilityEnv", "t2", {"spec": str(b / "x.yaml")}), replace=True)
        assert gym.registry[env_id].kwargs["spec"] == str(b / "x.yaml")
        assert [e.description for e in ENTRIES if e.id == env_id] == ["t2"]
    finally:
        gym.registry.pop(env_id, None)
        ENTRIES[:] = [e for e in ENTRIES if e.id != env_id]


def test_a_user_spec_with_a_starters_name_stops_the_import_with_both_files_named(tmp_path):
    shutil.copy(STARTER, tmp_path / STARTER.name)
    env = dict(os.environ, TRACE_GYM_ENVS_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", "import trace_gym"], env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode != 0
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("trace_gym.registration.DuplicateEnvError: trace/cap-refund-policy-v0")
    assert str(STARTER) in last and str(tmp_path / STARTER.name) in last


def test_an_invalid_user_spec_is_skipped_with_one_warning_and_never_listed(tmp_path):
    """A spec in TRACE_GYM_ENVS_DIR is checked against the schema at registration (no world is built):
    an invalid one is not registered, so `trace-gym envs` lists only envs that can be made."""
    text = STARTER.read_text(encoding="utf-8")
    (tmp_path / "cap-mine.yaml").write_text(text.replace("id: cap-refund-policy", "id: cap-mine", 1), encoding="utf-8")
    (tmp_path / "cap-noschema.yaml").write_text("id: cap-noschema\ntitle: Not a spec\ndomain: retail\n", encoding="utf-8")
    (tmp_path / "cap-renamed.yaml").write_text(text.replace("id: cap-refund-policy", "id: cap-other", 1), encoding="utf-8")
    (tmp_path / "cap-badtype.yaml").write_text(text.replace("id: cap-refund-policy", "id: cap-badtype", 1)
                                               .replace("max_steps: {knob: max_steps}", "max_steps: lots", 1), encoding="utf-8")
    (tmp_path / "cap-nodomain.yaml").write_text(text.replace("id: cap-refund-policy", "id: cap-nodomain", 1)
                                                .replace("domain: retail", "domain: bakery", 1), encoding="utf-8")
    env = dict(os.environ, TRACE_GYM_ENVS_DIR=str(tmp_path))
    env.pop("TRACE_GYM_DOMAINS", None)
    out = subprocess.run([sys.executable, "-m", "trace_gym.cli", "envs"], env=env, capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "trace/cap-mine-v0" in out.stdout
    for name in ("cap-noschema", "cap-renamed", "cap-badtype", "cap-nodomain"):
        assert f"trace/{name}-v0" not in out.stdout
        [line] = [ln for ln in out.stderr.splitlines() if f"{name}.yaml" in ln]
        assert "SpecFileWarning: spec file skipped:" in line, line
    assert "'capability' is a required property" in out.stderr and "got 'cap-other'" in out.stderr
    assert "cap-badtype.yaml: at max_steps:" in out.stderr
    assert "a registered domain" in out.stderr and "got 'bakery'" in out.stderr  # a domain no plug-in registers


def test_shipped_specs_are_not_schema_checked_at_import():
    """Registering the starter library reads names and title lines only (the schema engine stays unloaded)."""
    env = {k: v for k, v in os.environ.items() if k != "TRACE_GYM_ENVS_DIR"}
    code = "import sys, trace_gym; print('jsonschema' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.stdout.strip() == "False", out.stderr
