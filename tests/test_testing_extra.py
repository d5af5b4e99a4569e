"""``trace_gym.testing`` names what it needs: the ``testing`` extra, and a clear error without Hypothesis."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

from trace_gym import testing


def test_testing_extra_provides_hypothesis():
    meta = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text(encoding="utf-8"))
    extra = meta["project"]["optional-dependencies"]["testing"]
    assert any(req.split(">")[0].split("=")[0].strip() == "hypothesis" for req in extra)


@pytest.mark.parametrize("build", [testing.text_actions, testing.hostile_actions])
def test_strategies_without_hypothesis_say_how_to_install_it(monkeypatch, build):
    for name in [m for m in sys.modules if m == "hypothesis" or m.startswith("hypothesis.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "hypothesis", None)  # what an environment without it sees
    with pytest.raises(ImportError, match=r"pip install 'trace-gym\[testing\]'"):
        build()


def test_strategies_build_with_hypothesis():
    import json

    from hypothesis import HealthCheck, given, settings

    drawn: list = []

    @settings(max_examples=60, database=None, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(testing.text_actions(), testing.hostile_actions(["get_order_details"], max_size=50))
    def draw(text, hostile):
        drawn.append((text, hostile))

    draw()
    assert len(drawn) >= 20 and all(isinstance(t, str) and isinstance(h, str) for t, h in drawn)
    tagged = [t[len("<tool_call>"):-len("</tool_call>")] for t, _ in drawn if t.startswith("<tool_call>{") and t.endswith("}</tool_call>")]
    assert any(set(json.loads(body)) == {"name", "arguments"} for body in tagged), drawn  # a well-formed tagged call
    assert any("get_order_details" in h for _, h in drawn), drawn  # the hostile actions call the tool names given
