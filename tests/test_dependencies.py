"""Every package trace_gym imports is declared in pyproject.toml: in the core dependencies, or in the extra of
the feature that uses it (tests/test_wheel.py installs the wheel with what it declares and imports every
module)."""

from __future__ import annotations

import importlib.metadata
import re

import pytest

from tests import dependencies as deps


def test_every_import_in_trace_gym_is_declared():
    declared = deps.declared()
    undeclared = {name: sorted(users) for name, users in deps.third_party_imports().items()
                  if deps.distribution_of(name) not in declared}
    assert undeclared == {}


def test_the_import_names_map_to_the_distributions_that_provide_them():
    provided = importlib.metadata.packages_distributions()
    checked = 0
    for name in deps.third_party_imports():
        if name in provided:  # installed here: its metadata says which distribution it is
            assert deps.distribution_of(name) in {deps.normalize(d) for d in provided[name]}, name
            checked += 1
    assert checked >= 20


def test_every_requirement_has_a_lower_bound():
    for req in deps.core_requirements() + [r for reqs in deps.extras().values() for r in reqs]:
        assert re.search(r"(>=|==)\s*\d", req), req


def test_the_core_modules_need_only_the_core_and_the_rest_name_an_extra():
    core = deps.core_modules()
    assert {"trace_gym", "trace_gym.core.env", "trace_gym.tau2.env", "trace_gym.toolsandbox.env",
            "trace_gym.capabilities.env", "trace_gym.cli", "trace_gym.eval.scores"} <= core
    for module, need in deps.needs_at_import().items():
        if module not in core:
            extra_only = {n for n in need if "core" not in deps.declared()[deps.distribution_of(n)]}
            assert extra_only, module


@pytest.mark.parametrize("source, expected", [
    ("import scipy\n", {"scipy"}),
    ("def f():\n    import scipy\n", set()),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import torch\n", set()),
    ("class A:\n    import numpy\n", {"numpy"}),
])
def test_the_reader_tells_import_time_from_lazy_imports(source, expected, tmp_path, monkeypatch):
    path = tmp_path / "trace_gym" / "m.py"
    path.parent.mkdir()
    path.write_text(source)
    monkeypatch.setattr(deps, "modules", lambda: {"trace_gym.m": path})
    assert deps.imports("trace_gym.m", module_level=True)[0] == expected
    assert deps.imports("trace_gym.m", module_level=False)[0] >= expected
