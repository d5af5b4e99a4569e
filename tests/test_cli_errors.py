"""Bad command lines: one ``error:`` line on stderr, no traceback, exit 2 (usage) or 1 (failure)."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

try:
    from helpers_envs import ENV_ID, solve_actions
except ImportError:  # tests/ imported as a package
    from tests.helpers_envs import ENV_ID, solve_actions

from trace_gym.cli import main

UNWRITABLE = "/proc/trace-gym-cannot-write-here/out"


def _run(argv, capsys):
    capsys.readouterr()  # drop what earlier calls printed (capsys is shared by Hypothesis' examples)
    rc = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return rc, captured.err


def _assert_one_error_line(argv, rc, err, codes=(1, 2)):
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert "Traceback" not in err, (argv, err)
    assert rc in codes, (argv, rc, err)
    assert len(lines) == 1 and lines[0].startswith("error:"), (argv, err)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACE_GYM_CACHE_DIR", str(tmp_path / "cache"))  # `data fetch` cases never touch the user's


@pytest.fixture
def files(tmp_path):
    script = tmp_path / "actions.json"
    script.write_text(json.dumps(solve_actions(1)))
    traj = tmp_path / "t.jsonl"
    traj.write_text("")
    caps = tmp_path / "caps.json"
    caps.write_text('{"not": "capabilities"}')
    return {"script": script, "missing": tmp_path / "missing.jsonl", "empty_traj": traj, "caps": caps,
            "tmp": tmp_path}


def named_cases(f):
    s, missing = f["script"], f["missing"]
    return [
        # unknown ids
        (["play", "trace/no-such-env-v0", "--actions", s], 2),
        (["rollout", "trace/no-such-env-v0", "--policy", f"scripted:{s}", "--out", f["tmp"] / "o.jsonl"], None),
        (["eval", "--env", "trace/no-such-env-v0", "--policy", f"scripted:{s}", "--tasks", "1"], None),
        (["calibrate", "trace/no-such-env-v0", "--policy", "noop"], None),
        (["train", "--env", "trace/no-such-env-v0", "--model", "tiny", "--out", f["tmp"] / "a"], 2),
        (["eval", "--env", ENV_ID, "--policy", "no-such-policy"], 2),
        (["rollout", ENV_ID, "--policy", "no-such-policy", "--out", f["tmp"] / "o.jsonl"], 2),
        (["data", "fetch", "nope"], 2),
        # missing files
        (["play", ENV_ID, "--actions", missing], None),
        (["rollout", ENV_ID, "--policy", f"scripted:{missing}", "--out", f["tmp"] / "o.jsonl"], None),
        (["analyze", missing], None),
        (["analyze", f["empty_traj"]], None),
        (["synthesize", missing, "--domain", "retail"], None),
        (["synthesize", f["caps"], "--domain", "retail", "--out", f["tmp"] / "envs"], None),
        (["conformance", "tau2", missing], None),
        (["conformance", "toolsandbox", missing], None),
        (["train", "--config", missing, "--print-config"], 2),
        (["compare", "--config", missing], 2),
        (["compare", "--redraw", missing], 2),
        (["data", "fetch", "tau2", "--from", missing], 1),
        # unwritable output folders
        (["rollout", ENV_ID, "--policy", f"scripted:{s}", "--option", "task=1", "--out", UNWRITABLE], 1),
        (["analyze", f["empty_traj"], "--out", UNWRITABLE], None),
        (["data", "fetch", "tau2", "--from", missing, "--dest", UNWRITABLE], 1),
        # unknown keys and mistyped values
        (["compare", "--train", "no_such_key=1"], 2),
        (["compare", "--gen", "temprature=0.5"], 2),
        (["compare", "--methods", "nope"], 2),
        (["train", "--set", "lora_r=abc", "--print-config"], 2),
        (["train", "--set", "no_such=1", "--print-config"], 2),
        (["train", "--set", "learning_rate=[1]", "--print-config"], 2),
        (["play", ENV_ID, "--actions", s, "--option", "novalue"], 2),
        (["rollout", ENV_ID, "--policy", f"scripted:{s}", "--out", f["tmp"] / "o.jsonl", "--seeds", "9-1"], 2),
        (["eval", "--env", ENV_ID, "--policy", f"scripted:{s}", "--env-kwargs", "{"], 2),
        (["eval", "--env", ENV_ID, "--policy", f"scripted:{s}", "--trials", "0"], 2),
        (["calibrate", ENV_ID, "--policy", "noop", "--samples", "0"], 2),
        (["calibrate", ENV_ID, "--policy", "noop", "--band", "x"], 2),
        # sizes and counts out of range, refused before any work
        (["eval", "--env", ENV_ID, "--policy", f"scripted:{s}", "--trials", "99999999999999999999"], 2),
        (["eval", "--env", ENV_ID, "--policy", f"scripted:{s}", "--tasks", "1", "--limit", "0"], 2),
        (["eval", "--env", ENV_ID, "--policy", f"scripted:{s}", "--tasks", "1", "--limit", "-1"], 2),
        (["eval", "--env", ENV_ID, "--policy", f"scripted:{s}", "--tasks", "1", "--batch-size", "0"], 2),
        (["rollout", ENV_ID, "--policy", f"scripted:{s}", "--out", f["tmp"] / "o.jsonl", "--seeds", "0-99999999999999"], 2),
        (["calibrate", ENV_ID, "--policy", "noop", "--max-rounds", "-1", "--tune"], 2),
        (["calibrate", ENV_ID, "--policy", "noop", "--seeds", "99999999999"], 2),
        (["analyze", f["empty_traj"], "--runs", "0"], 2),
        (["play", ENV_ID, "--actions", s, "--seed", "-1"], 2),
        (["play", ENV_ID, "--actions", s, "--env-arg", "max_steps=-5"], 2),
        # a folder where a file is expected
        (["play", ENV_ID, "--actions", f["tmp"]], 2),
        (["rollout", ENV_ID, "--policy", f"scripted:{f['tmp']}", "--out", f["tmp"] / "o.jsonl"], 2),
        (["eval", "--env", ENV_ID, "--policy", f"scripted:{f['tmp']}", "--tasks", "1"], 2),
        (["calibrate", ENV_ID, "--policy", f"scripted:{f['tmp']}"], 2),
        (["analyze", f["tmp"]], 2),
        (["synthesize", f["tmp"], "--domain", "retail"], 2),
        (["conformance", "tau2", f["tmp"]], 2),
        (["train", "--config", f["tmp"], "--print-config"], 2),
        (["compare", "--config", f["tmp"]], 2),
        # argparse errors
        (["no-such-verb"], 2),
        (["eval"], 2),
        (["rollout", ENV_ID], 2),
        (["eval", "--env", ENV_ID, "--policy", "p", "--trials", "abc"], 2),
        (["demo", "--model", "huge"], 2),
        (["data"], 2),
    ]


def test_named_bad_invocations(files, capsys):
    for argv, code in named_cases(files):
        rc, err = _run(argv, capsys)
        _assert_one_error_line(argv, rc, err, (code,) if code else (1, 2))


def test_debug_shows_the_traceback(files, capsys):
    argv = ["eval", "--env", "trace/no-such-env-v0", "--policy", f"scripted:{files['script']}", "--tasks", "1"]
    rc, err = _run(argv, capsys)
    assert rc == 2 and "NameNotFound" in err and "--debug" in err
    with pytest.raises(Exception, match="no-such-env"):  # --debug anywhere: the exception itself, traceback and all
        main([*argv, "--debug"])
    with pytest.raises(Exception, match="no-such-env"):
        main(["--debug", *argv])


WORD = st.text(alphabet=st.characters(codec="utf-8", exclude_characters=":=\x00", exclude_categories=("Cs",)),
               min_size=1, max_size=12)


def _skeletons(f):
    """Per verb: a command line that reaches the command's own code, and wrong pieces to add to it.
    Each piece alone makes the line fail before (or at the start of) the command's real work: a
    generated word ``w`` becomes a name that cannot exist (``zz`` + w) or a number that cannot
    parse (w + ``x``)."""
    s, missing, out = f["script"], f["missing"], f["tmp"] / "o.jsonl"

    def pieces(*items):
        return lambda w: [[a.format(n=f"zz{w}", x=f"{w}x") if isinstance(a, str) else a for a in item]
                          for item in items]

    return {
        "play": ([ENV_ID, "--actions", s, "--option", "task=1", "--quiet"],
                 pieces(["trace/{n}"], ["--actions", missing], ["--option", "{n}"], ["--env-arg", "{n}=1"],
                        ["--seed", "{x}"], ["--option", "task=99"], ["--actions", f["caps"]], ["--seed", "-1"],
                        ["--env-arg", "max_steps=-5"], ["--actions", f["tmp"]])),
        "rollout": ([ENV_ID, "--policy", f"scripted:{s}", "--out", out, "--option", "task=1"],
                    pieces(["trace/{n}"], ["--policy", "{n}"], ["--policy", f"scripted:{missing}"], ["--seeds", "{x}"],
                           ["--seeds", "9-1"], ["--out", UNWRITABLE], ["--batch-size", "0"], ["--env-arg", "{n}=1"],
                           ["--max-new-tokens", "{x}"], ["--seeds", "0-99999999999999"])),
        "eval": (["--env", ENV_ID, "--policy", f"scripted:{s}", "--tasks", "1", "--trials", "1", "--out", f["tmp"] / "ev"],
                 pieces(["--env", "trace/{n}"], ["--policy", "{n}"], ["--trials", "0"], ["--trials", "{x}"],
                        ["--env-kwargs", "{n}"], ["--env-kwargs", "[1]"], ["--split", "{n}"], ["--out", UNWRITABLE],
                        ["--trials", "99999999999999999999"], ["--limit", "0"], ["--limit", "-1"], ["--batch-size", "0"])),
        "calibrate": ([ENV_ID, "--policy", "noop", "--seeds", "1", "--samples", "1", "--no-progress"],
                      pieces(["trace/{n}"], ["--policy", "{n}"], ["--samples", "0"], ["--band", "{x}"],
                             ["--difficulty", "{n}"], ["--seeds", "{x}"], ["--max-rounds", "-1"], ["--json-out", UNWRITABLE])),
        "train": (["--env", ENV_ID, "--model", "tiny", "--out", f["tmp"] / "ad", "--print-config"],
                  pieces(["--set", "{n}=1"], ["--set", "lora_r={n}"], ["--set", "learning_rate=[{n}]"],
                         ["--steps", "-1"], ["--steps", "{x}"], ["--config", missing], ["--lr", "{x}"], ["--set", "{n}"])),
        "analyze": ([f["empty_traj"], "--out", f["tmp"] / "an"],
                    pieces([], ["--labeler", "{n}"], ["--runs", "{x}"], ["--rho", "{x}"], ["--out", UNWRITABLE], ["--runs", "0"])),
        "synthesize": ([f["caps"], "--domain", "retail", "--out", f["tmp"] / "envs"],
                       pieces([], ["--domain", "{n}"], ["--seeds", "{x}"], ["--difficulty", "{n}"])),
        "compare": ([],
                    pieces(["--train", "{n}=1"], ["--gen", "{n}=1"], ["--set", "{n}=1"], ["--methods", "{n}"],
                           ["--trials", "0"], ["--budget", "-1"], ["--config", missing], ["--budgets", "{x}"],
                           ["--redraw", missing], ["--budget", "{x}"])),
    }


ONE_SHOT = {  # verbs whose wrong lines are tried one at a time (a combination could turn into a valid one)
    "data": lambda w, f: [["status", "--zz" + w], ["fetch", "zz" + w], ["fetch", "tau2", "--from", f["missing"]],
                          ["fetch", "toolsandbox", "--from", f["missing"]], ["zz" + w]],
    "conformance": lambda w, f: [["tau2", f["missing"]], ["toolsandbox", f["missing"]], ["zz" + w, f["missing"]],
                                 ["tau2"]],
    "envs": lambda w, f: [["--zz" + w], ["--filter"], ["zz" + w]],
}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_generated_bad_invocations_fail_with_one_line(data, files, tmp_path_factory, capsys):
    skeletons = _skeletons(files)
    verb = data.draw(st.sampled_from(sorted([*skeletons, *ONE_SHOT])), label="verb")
    word = data.draw(WORD, label="word")
    if verb in ONE_SHOT:
        argv = [verb, *data.draw(st.sampled_from(ONE_SHOT[verb](word, files)), label="wrong")]
    else:
        base, wrong = skeletons[verb]
        pieces = data.draw(st.lists(st.sampled_from(wrong(word)), min_size=1, max_size=3), label="wrong")
        argv = [verb, *base, *[a for p in pieces for a in p]]
    cwd = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("cwd"))  # whatever a command writes lands in a scratch folder
    try:
        rc, err = _run(argv, capsys)
    finally:
        os.chdir(cwd)
    _assert_one_error_line(argv, rc, err)


def test_unknown_reset_option_keys_are_refused(tau2_data, files, capsys):
    s, out = files["script"], files["tmp"] / "opts.jsonl"
    for argv in (["play", "trace/tau2-mock-v0", "--actions", s, "--option", "tsk=1"],
                 ["rollout", "trace/tau2-mock-v0", "--policy", f"scripted:{s}", "--out", out, "--option", "tsk=1"]):
        rc, err = _run(argv, capsys)
        _assert_one_error_line(argv, rc, err, (2,))
        assert "'tsk'" in err and "task_id" in err  # names the key and the ones the env reads
    assert not out.exists()


def test_declared_reset_option_keys_cover_the_task_option():
    import gymnasium as gym

    from trace_gym.cli.play import check_reset_options

    for env_id in ("trace/tau2-mock-v0", "trace/toolsandbox-v0", "trace/cap-refund-policy-v0"):
        creator = gym.envs.registration.load_env_creator(gym.spec(env_id).entry_point)
        assert creator.reset_option_keys, env_id
        check_reset_options(env_id, dict.fromkeys(creator.reset_option_keys))  # every declared key passes
    check_reset_options(ENV_ID, {"anything": 1})  # an env that declares nothing is not second-guessed


def test_training_config_values_are_type_checked():
    from trace_gym.train.config import ConfigError, TrainConfig

    for name, value in [("lora_r", "abc"), ("learning_rate", float("nan")), ("progress", "yes"),
                        ("lora_target_modules", [1]), ("beta", True), ("max_turns", 2.5), ("env_kwargs", [])]:
        with pytest.raises(ConfigError, match=name):
            TrainConfig(**{name: value}).validate()
    TrainConfig(learning_rate=1, lora_target_modules=["q_proj"], max_turns=None, hint_fraction=0.5,
                gradient_checkpointing=None, cpu_threads=2).validate()


def test_bad_sizes_and_counts_name_their_flag(files, capsys):
    s = files["script"]
    for flag, argv in [
        ("--trials", ["eval", "--env", ENV_ID, "--policy", f"scripted:{s}", "--trials", "99999999999999999999"]),
        ("--limit", ["eval", "--env", ENV_ID, "--policy", f"scripted:{s}", "--tasks", "1", "--limit", "0"]),
        ("--batch-size", ["eval", "--env", ENV_ID, "--policy", f"scripted:{s}", "--tasks", "1", "--batch-size", "0"]),
        ("--seeds", ["rollout", ENV_ID, "--policy", f"scripted:{s}", "--out", files["tmp"] / "o.jsonl", "--seeds", "0-99999999999999"]),
        ("--max-rounds", ["calibrate", ENV_ID, "--policy", "noop", "--tune", "--max-rounds", "-1"]),
        ("--band", ["calibrate", ENV_ID, "--policy", "noop", "--band", "abc"]),
        ("--band", ["calibrate", ENV_ID, "--policy", "noop", "--band", "0.6,0.2"]),
        ("--runs", ["analyze", files["empty_traj"], "--runs", "0"]),
        ("--seed", ["play", ENV_ID, "--actions", s, "--seed", "-1"]),
    ]:
        rc, err = _run(argv, capsys)
        _assert_one_error_line(argv, rc, err, (2,))
        assert flag in err and "Error: Error" not in err, (argv, err)
    assert not (files["tmp"] / "o.jsonl").exists()


def test_a_capability_env_refuses_a_bad_step_limit(tau2_data, files, capsys):
    argv = ["play", "trace/cap-refund-policy-v0", "--actions", files["script"], "--env-arg", "max_steps=-5"]
    rc, err = _run(argv, capsys)
    _assert_one_error_line(argv, rc, err, (2,))
    assert "max_steps must be >= 1" in err


def test_a_folder_where_a_file_is_expected_is_named_as_one(files, capsys):
    folder = files["tmp"]
    for argv in (["play", ENV_ID, "--actions", folder], ["analyze", folder], ["conformance", "tau2", folder],
                 ["train", "--config", folder, "--print-config"], ["compare", "--config", folder],
                 ["rollout", ENV_ID, "--policy", f"scripted:{folder}", "--out", folder / "o.jsonl"]):
        rc, err = _run(argv, capsys)
        _assert_one_error_line(argv, rc, err, (2,))
        assert f"{folder}: expected the" in err and "got a folder" in err, (argv, err)


def test_conformance_on_a_file_that_is_not_a_corpus(files, capsys):
    tmp = files["tmp"]
    good = json.dumps({"domain": "mock", "task_id": "1", "messages": [], "expected": {}})
    cases = {
        "eval_notjson.jsonl": (f"{good}\n{{not json\n".encode(), ":2: not a τ²-bench corpus"),
        "eval_fields.jsonl": (b'{"domain": "mock"}\n', "no task_id, messages, expected"),
        "tools_fields.jsonl": (b'{"sequence_id": 1}\n', "no domain, calls"),
        "eval_latin1.jsonl": ('{"domain": "caf\xe9"}\n'.encode("latin-1"), "not UTF-8"),
        "eval_empty.jsonl": (b"\n", "no records"),
        "eval_list.jsonl": (b"[1, 2]\n", "no domain"),
    }
    for name, (data, says) in cases.items():
        (tmp / name).write_bytes(data)
        argv = ["conformance", "tau2", tmp / name]
        rc, err = _run(argv, capsys)
        _assert_one_error_line(argv, rc, err, (1,))
        assert name in err and says in err, (name, err)


def test_clear_messages_name_what_the_user_gave(files, capsys):
    tmp = files["tmp"]
    bad = tmp / "compare.json"
    bad.write_text("{not json")
    rc, err = _run(["compare", "--config", bad], capsys)
    _assert_one_error_line(["compare"], rc, err, (2,))
    assert str(bad) in err and "not valid JSON" in err
    bad_yaml = tmp / "compare.yaml"
    bad_yaml.write_text("a: [1\nb: 2\n")
    rc, err = _run(["compare", "--config", bad_yaml], capsys)
    _assert_one_error_line(["compare"], rc, err, (2,))
    assert str(bad_yaml) in err and "not valid YAML" in err
    for target in ("/proc/trace-gym-out.json", UNWRITABLE, tmp):
        argv = ["calibrate", ENV_ID, "--policy", "noop", "--seeds", "1", "--samples", "1", "--no-progress", "--json-out", target]
        rc, err = _run(argv, capsys)
        _assert_one_error_line(argv, rc, err, (1,))
        assert f"--json-out {target}" in err and ".tmp" not in err, err


def test_an_atomic_write_that_cannot_start_names_the_file():
    from trace_gym.io import atomic_write_text

    with pytest.raises(OSError, match="cannot write /proc/trace-gym-x.json") as info:
        atomic_write_text("/proc/trace-gym-x.json", "{}")
    assert ".tmp" not in str(info.value)


def test_failed_train_and_compare_leave_no_empty_output_folder(files, capsys):
    tmp = files["tmp"]
    for argv, out in (
        (["train", "--env", ENV_ID, "--model", str(tmp / "no-such-model"), "--out", tmp / "new" / "adapter"], tmp / "new"),
        (["sft", "--sft-envs", "trace/cap-refund-policy-v0", "--model", str(tmp / "no-such-model"),
          "--out", tmp / "sft" / "adapter"], tmp / "sft"),
        (["compare", "--target", "trace/no-such-env-v0", "--model", "tiny", "--out", tmp / "cmp"], tmp / "cmp"),
    ):
        rc, err = _run(argv, capsys)
        assert rc != 0 and err.strip().splitlines()[-1].startswith("error:"), (argv, err)
        assert not out.exists(), (argv, sorted(out.rglob("*")))
    kept = tmp / "kept"
    (kept / "adapter").mkdir(parents=True)
    rc, _ = _run(["train", "--env", ENV_ID, "--model", str(tmp / "no-such-model"), "--out", kept / "adapter"], capsys)
    assert rc != 0 and (kept / "adapter").is_dir()  # a folder that was there before is the user's


def test_removing_empty_output_keeps_what_a_run_wrote(tmp_path):
    from trace_gym.cli import removing_empty_output

    with pytest.raises(RuntimeError), removing_empty_output(tmp_path / "a" / "b"):
        (tmp_path / "a" / "b" / "c").mkdir(parents=True)
        raise RuntimeError
    assert not (tmp_path / "a").exists()
    with pytest.raises(RuntimeError), removing_empty_output(tmp_path / "a" / "b"):
        (tmp_path / "a" / "b").mkdir(parents=True)
        (tmp_path / "a" / "b" / "state.json").write_text("{}")
        raise RuntimeError
    assert (tmp_path / "a" / "b" / "state.json").exists()
