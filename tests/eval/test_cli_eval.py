"""``trace-gym eval`` takes its default split and task options from the env's task source."""

from __future__ import annotations

import json

from trace_gym.cli import main


def _script(tmp_path):
    path = tmp_path / "refuse.txt"
    path.write_text("I cannot help with that. ###STOP###\n", encoding="utf-8")
    return f"scripted:{path}"


def test_eval_on_mock_uses_its_default_split(tmp_path, tau2_data, capsys):
    from trace_gym.tau2.data import load_splits

    out = tmp_path / "eval"
    rc = main(["eval", "--env", "trace/tau2-mock-v0", "--policy", _script(tmp_path), "--trials", "1", "--limit", "2",
               "--batch-size", "1", "--out", str(out)])
    assert rc == 0, capsys.readouterr().err
    doc = json.loads((out / "comparison.json").read_text(encoding="utf-8"))
    assert doc["tasks"] == load_splits("mock")["base"][:2]  # mock has only a base split
    (report,) = doc["reports"]
    assert report["n_tasks"] == 2 and list(report["groups"]) == ["mock"]


def test_eval_with_a_split_the_env_lacks_is_one_line(tmp_path, tau2_data, capsys):
    rc = main(["eval", "--env", "trace/tau2-mock-v0", "--policy", _script(tmp_path), "--split", "test",
               "--out", str(tmp_path / "eval")])
    err = capsys.readouterr().err
    assert rc == 2 and "no split 'test'" in err and "['base']" in err and "Traceback" not in err
