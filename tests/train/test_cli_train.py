import json

from trace_gym.cli import main


def test_print_config_merges_file_flags_and_overrides(tmp_path, capsys):
    (tmp_path / "c.yaml").write_text("num_generations: 4\nlora_r: 8\n")
    rc = main(["train", "--env", "trace-test/train-single-v0", "--model", "tiny", "--out", str(tmp_path / "a"),
               "--config", str(tmp_path / "c.yaml"), "--lora-r", "2", "--set", "hint_fraction=0.5", "--print-config"])
    assert rc == 0
    cfg = json.loads(capsys.readouterr().out)
    assert cfg["num_generations"] == 4 and cfg["lora_r"] == 2 and cfg["hint_fraction"] == 0.5 and cfg["beta"] == 0.0


def test_cli_errors_are_clear(tmp_path, capsys):
    assert main(["train", "--env", "trace-test/train-single-v0", "--model", "tiny"]) == 2
    assert "missing --out" in capsys.readouterr().err
    assert main(["train", "--env", "nope/unknown-v0", "--model", "tiny", "--out", str(tmp_path / "a")]) == 2
    assert "unknown env" in capsys.readouterr().err
    assert main(["train", "--env", "x", "--model", "tiny", "--out", "o", "--set", "bogus=1"]) == 2
    assert "unknown config key" in capsys.readouterr().err
    assert main(["train", "--env", "x", "--model", "tiny", "--out", "o", "--set", "num_generations=1"]) == 2
    assert "num_generations must be >= 2" in capsys.readouterr().err


def test_resume_needs_a_checkpoint_and_the_same_config(tmp_path, capsys):
    from trace_gym.train.config import TrainConfig

    out = tmp_path / "adapters" / "a"
    args = ["train", "--env", "trace-test/train-single-v0", "--model", "tiny", "--out", str(out), "--resume", "--import", "tests.train.envs"]
    assert main(args) == 2
    assert "no checkpoint" in capsys.readouterr().err
    (out / "checkpoints" / "checkpoint-1").mkdir(parents=True)
    old = TrainConfig(env_id="trace-test/train-single-v0", model="tiny", out=str(out), learning_rate=1e-3)
    (out / "train_config.json").write_text(json.dumps(old.to_dict()))
    assert main(args) == 2
    assert "learning_rate changed" in capsys.readouterr().err


def test_shared_prefix_options(tmp_path, capsys):
    base = ["train", "--env", "trace-test/train-single-v0", "--model", "tiny", "--out", str(tmp_path / "a"), "--print-config"]
    assert main(base) == 0
    cfg = json.loads(capsys.readouterr().out)
    assert cfg["shared_prefix"] is True and cfg["prefix_grad"] == "exact"
    assert main([*base, "--no-shared-prefix"]) == 0
    assert json.loads(capsys.readouterr().out)["shared_prefix"] is False
    assert main([*base, "--prefix-grad", "detached"]) == 0
    cfg = json.loads(capsys.readouterr().out)
    assert cfg["shared_prefix"] is True and cfg["prefix_grad"] == "detached"
    assert main([*base, "--no-shared-prefix", "--prefix-grad", "detached"]) == 2
    assert "needs shared_prefix" in capsys.readouterr().err
    assert cfg["lm_head"] == "fused"
    assert main([*base, "--lm-head", "full"]) == 0
    assert json.loads(capsys.readouterr().out)["lm_head"] == "full"
    assert main([*base, "--no-shared-prefix", "--lm-head", "full"]) == 2
    assert "lm_head=full needs shared_prefix" in capsys.readouterr().err
    assert main([*base, "--lm-head", "chunked"]) == 2
    assert "lm_head" in capsys.readouterr().err
