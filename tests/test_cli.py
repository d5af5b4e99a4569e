"""trace-gym envs / play / rollout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

try:
    from helpers_envs import ENV_ID, solve_actions
except ImportError:  # tests/ imported as a package
    from tests.helpers_envs import ENV_ID, solve_actions

from trace_gym import list_envs
from trace_gym.cli import main
from trace_gym.cli.play import parse_options
from trace_gym.cli.rollout import parse_seeds
from trace_gym.rollout import TrajectoryStore

TESTS_DIR = Path(__file__).resolve().parent


def test_envs_json_matches_registry(capsys):
    assert main(["envs", "--json"]) == 0
    listed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(e["id"], e["description"]) for e in listed] == list_envs()


def test_envs_table(capsys):
    assert main(["envs"]) == 0
    out = capsys.readouterr().out
    if list_envs():
        assert list_envs()[0][0] in out
    else:
        assert "no environments registered" in out
    assert main(["envs", "--filter", "no-such-env-xyz"]) == 0
    assert "no environments registered matching" in capsys.readouterr().out


def test_parse_helpers():
    assert parse_seeds("0-3") == [0, 1, 2, 3]
    assert parse_seeds("5, 1-2,5") == [5, 1, 2]
    for bad in ["", "a", "3-1", "1-"]:
        with pytest.raises(ValueError):
            parse_seeds(bad)
    assert parse_options(["task=2", "name=bob", 'x={"a": [1]}', "s=a=b"]) == {"task": 2, "name": "bob", "x": {"a": [1]}, "s": "a=b"}
    with pytest.raises(ValueError):
        parse_options(["novalue"])


def test_play_solves_with_a_json_script(tmp_path, capsys):
    script = tmp_path / "actions.json"
    script.write_text(json.dumps(solve_actions(1)))
    rc = main(["play", ENV_ID, "--actions", str(script), "--seed", "3", "--option", "task=1"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "episode over after 3 steps: user_stop; reward 1" in out
    assert "write_note" in out and "Thanks, that's all." in out and '"db_match": 1.0' in out
    script.write_text(json.dumps([*solve_actions(1), "one more", "and another"]))
    assert main(["play", ENV_ID, "--actions", str(script), "--option", "task=1", "-q"]) == 0
    assert "2 scripted action(s) were not used" in capsys.readouterr().err


def test_play_line_script_from_stdin(monkeypatch, capsys):
    import io

    lines = "\n".join(solve_actions(0, style="python")) + "\n"
    monkeypatch.setattr(sys, "stdin", io.StringIO(lines))
    assert main(["play", ENV_ID, "--actions", "-", "--option", "task=0", "-q"]) == 0
    out = capsys.readouterr().out
    assert "reward 1" in out and "read_note" not in out  # -q hides the transcript


def test_play_reports_short_scripts_and_bad_input(tmp_path, capsys):
    script = tmp_path / "a.txt"
    script.write_text("hello\n")
    assert main(["play", ENV_ID, "--actions", str(script)]) == 1
    assert "the actions ran out after 1 steps" in capsys.readouterr().err
    assert main(["play", ENV_ID, "--actions", str(tmp_path / "missing.txt")]) == 2
    assert "action script not found" in capsys.readouterr().err
    assert main(["play", ENV_ID, "--actions", str(script), "--option", "oops"]) == 2
    assert main(["play", "trace-test/no-such-env-v0", "--actions", str(script)]) == 2
    assert "cannot make" in capsys.readouterr().err
    assert main(["play", ENV_ID, "--actions", str(script), "--option", "task=99"]) == 2
    assert "reset failed" in capsys.readouterr().err


def test_rollout_scripted_is_resumable(tmp_path, capsys):
    script = tmp_path / "s.json"
    script.write_text(json.dumps(solve_actions(2)))
    out = tmp_path / "t.jsonl"
    args = ["rollout", ENV_ID, "--policy", f"scripted:{script}", "--out", str(out), "--option", "task=2"]
    assert main([*args, "--seeds", "0-3"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["new_episodes"] == 4 and summary["mean_reward_new"] == 1.0
    assert main([*args, "--seeds", "2-5"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["new_episodes"] == 2 and summary["skipped_already_stored"] == 2 and summary["stored_before"] == 4
    stored = TrajectoryStore(out).load()
    assert [t.seed for t in stored] == [0, 1, 2, 3, 4, 5]
    assert {t.policy_id for t in stored} == {"scripted:s.json"} and {t.env_id for t in stored} == {ENV_ID}


def test_rollout_errors(tmp_path, capsys):
    short = tmp_path / "short.txt"
    short.write_text(solve_actions(0, style="python")[0] + "\n")
    out = tmp_path / "t.jsonl"
    rc = main(["rollout", ENV_ID, "--policy", f"scripted:{short}", "--out", str(out), "--option", "task=0"])
    err = capsys.readouterr().err
    assert rc == 1 and "the script ran out after 1 actions" in err and "resume" in err
    assert main(["rollout", ENV_ID, "--policy", "bogus", "--out", str(out)]) == 2
    assert "unknown policy spec" in capsys.readouterr().err
    assert main(["rollout", ENV_ID, "--policy", f"scripted:{short}", "--out", str(out), "--seeds", "9-1"]) == 2
    out.write_text('{"broken\n{}\n')
    assert main(["rollout", ENV_ID, "--policy", f"scripted:{short}", "--out", str(out)]) == 2
    assert "t.jsonl:1: corrupt trajectory record" in capsys.readouterr().err


def test_console_script_in_a_fresh_process(tmp_path):
    script = tmp_path / "s.txt"
    script.write_text("\n".join(solve_actions(3, style="json")) + "\n")
    out = tmp_path / "t.jsonl"
    env = {**os.environ, "PYTHONPATH": str(TESTS_DIR)}
    cmd = [sys.executable, "-c", "import sys; from trace_gym.cli import main; sys.exit(main())"]
    run = subprocess.run(
        [*cmd, "rollout", f"helpers_envs:{ENV_ID}", "--policy", f"scripted:{script}", "--seeds", "0,1", "--out", str(out), "--option", "task=3"],
        capture_output=True, text=True, env=env, timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout.strip().splitlines()[-1])["new_episodes"] == 2
    assert [t.reward for t in TrajectoryStore(out).load()] == [1.0, 1.0]
