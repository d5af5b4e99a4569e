import json

import pytest

from trace_gym.train.config import ConfigError, TrainConfig, load_config


def test_defaults_are_the_trace_recipe():
    cfg = TrainConfig()
    assert cfg.beta == 0.0
    assert cfg.temperature == 1.0
    assert cfg.epsilon_high > cfg.epsilon
    assert cfg.resample_constant_groups and cfg.max_resamples >= 1 and cfg.drop_constant_groups
    assert cfg.lora_target_modules == "all-linear"
    cfg.validate()


def test_yaml_and_json_round_trip(tmp_path):
    cfg = TrainConfig(env_id="trace-test/train-single-v0", model="tiny", out="x", lora_r=4, lora_target_modules=["q_proj", "v_proj"], hint_fraction=0.25)
    (tmp_path / "c.json").write_text(json.dumps(cfg.to_dict()))
    assert load_config(tmp_path / "c.json") == cfg
    import yaml

    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg.to_dict()))
    assert load_config(tmp_path / "c.yaml") == cfg


def test_unknown_keys_and_bad_values_are_clear_errors(tmp_path):
    (tmp_path / "bad.yaml").write_text("num_generation: 4\n")
    with pytest.raises(ConfigError, match="num_generation"):
        load_config(tmp_path / "bad.yaml")
    with pytest.raises(ConfigError, match="num_generations must be >= 2"):
        TrainConfig(num_generations=1).validate()
    with pytest.raises(ConfigError, match="hint_fraction"):
        TrainConfig(hint_fraction=1.5).validate()
    with pytest.raises(ConfigError, match="backend"):
        TrainConfig(backend="tpu").validate()
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(ConfigError, match="invalid JSON"):
        load_config(tmp_path / "broken.json")


def test_set_from_string_parses_values():
    cfg = TrainConfig().set_from_string("num_generations=4").set_from_string("lora_target_modules=[q_proj, k_proj]")
    cfg = cfg.set_from_string("max_turns=null").set_from_string("epsilon_high=0.3")
    assert cfg.num_generations == 4 and cfg.lora_target_modules == ["q_proj", "k_proj"]
    assert cfg.max_turns is None and cfg.epsilon_high == 0.3
    with pytest.raises(ConfigError, match="unknown config key"):
        cfg.set_from_string("nope=1")
    with pytest.raises(ConfigError, match="name=value"):
        cfg.set_from_string("novalue")


def test_shared_prefix_is_on_by_default_and_prefix_grad_is_checked():
    cfg = TrainConfig()
    assert cfg.shared_prefix is True and cfg.prefix_grad == "exact"
    TrainConfig(prefix_grad="detached").validate()
    with pytest.raises(ConfigError, match="prefix_grad"):
        TrainConfig(prefix_grad="frozen").validate()
    with pytest.raises(ConfigError, match="needs shared_prefix"):
        TrainConfig(prefix_grad="detached", shared_prefix=False).validate()
