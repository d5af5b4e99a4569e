"""Each stage's settings are checked when made, with an error naming the field; the front ends get those errors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trace_gym.compare.config import CompareConfig
from trace_gym.demo.config import DemoConfig
from trace_gym.pipeline import Target, TracePlan
from trace_gym.pipeline.settings import (
    AnalysisSettings,
    CalibrationSettings,
    RoutingSettings,
    SynthesisSettings,
    TrainingSettings,
    current_names,
    recorded_names,
)


@pytest.mark.parametrize(("make", "field"), [
    (lambda: AnalysisSettings(min_capabilities=-1), "min_capabilities"),
    (lambda: AnalysisSettings(max_capabilities=1.5), "max_capabilities"),
    (lambda: SynthesisSettings(max_envs=-2), "max_envs"),
    (lambda: CalibrationSettings(calib_seeds=True), "calib_seeds"),
    (lambda: CalibrationSettings(tune_episodes=-1), "tune_episodes"),
    (lambda: CalibrationSettings(cap_knobs={"withheld_weight": "half"}), "cap_knobs"),
    (lambda: CalibrationSettings(mastered=1.5), "mastered"),
    (lambda: CalibrationSettings(band=(0.6, 0.2)), "band"),
    (lambda: CalibrationSettings(band=[0.2]), "band"),
    (lambda: TrainingSettings(train=[1]), "train"),
    (lambda: TrainingSettings(max_train_steps=-1), "max_train_steps"),
    (lambda: TrainingSettings(cap_rehearse_peers="yes"), "cap_rehearse_peers"),
    (lambda: RoutingSettings(routing_seeds=-1), "routing_seeds"),
    (lambda: RoutingSettings(router_rule="nearest"), "router_rule"),
    (lambda: RoutingSettings(adapter_choice="best"), "adapter_choice"),
    (lambda: RoutingSettings(adapter_choice="select"), "router_rule 'needs'"),
    (lambda: RoutingSettings(select_tasks=0), "select_tasks"),
    (lambda: RoutingSettings(need_examples=0), "need_examples"),
])
def test_a_bad_value_is_an_error_naming_its_field(make, field):
    with pytest.raises(ValueError, match=field):
        make()


def test_the_defaults_validate_and_a_band_is_two_floats():
    assert CalibrationSettings(band=[0, 1]).band == (0.0, 1.0)
    for kind in (AnalysisSettings, SynthesisSettings, CalibrationSettings, TrainingSettings, RoutingSettings):
        kind()


def test_the_plan_takes_settings_objects_only(tmp_path):
    with pytest.raises(TypeError, match="TracePlan.routing must be a RoutingSettings"):
        TracePlan(target=Target("trace/toolsandbox-v0"), root=tmp_path, model="tiny", base_policy=lambda: None,
                  jobs=[], routing={"routing_seeds": 2})


def test_the_front_ends_report_the_stage_settings_errors():
    with pytest.raises(ValueError, match="tune_episodes must be an integer >= 0"):
        DemoConfig(model="tiny", target="toolsandbox", tune_episodes=-3)
    with pytest.raises(ValueError, match="band must satisfy"):
        CompareConfig(band=[0.9, 0.1]).validate()
    with pytest.raises(ValueError, match="routing_seeds must be an integer >= 0"):
        CompareConfig.from_dict({"router_seeds": -1}).validate()


@given(st.dictionaries(st.sampled_from(["router_seeds", "routing_seeds", "seed", "calib_seeds", "settings"]),
                       st.integers(0, 9)))
def test_old_spellings_map_to_the_current_names_and_nothing_else_changes(settings):
    if {"router_seeds", "routing_seeds"} <= set(settings):
        with pytest.raises(ValueError, match="name the same setting"):
            current_names(settings)
        assert recorded_names(settings) == settings  # a record naming it twice is left as it is (it will not match)
        return
    now = current_names(settings)
    assert "router_seeds" not in now and len(now) == len(settings)
    assert now.get("routing_seeds") == settings.get("router_seeds", settings.get("routing_seeds"))
    assert recorded_names({"settings": settings, "after": {}}) == {"settings": now, "after": {}}
