"""Bring your own domain: a plug-in registered through TRACE_GYM_DOMAINS serves specs like a built-in,
every broken plug-in is refused in one line naming it, and the example runs the whole loop."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from tests.extras import need, need_smollm2
from trace_gym.capabilities.dict_domain import DictDomain, DomainTool
from trace_gym.capabilities.domains import domain_names, get_domain, reset_domains
from trace_gym.capabilities.plugins import DomainPluginError

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "byo_domain"
SPECS = EXAMPLE / "specs"
SHOP = "bookshop=bookshop_domain:make_domain"


@pytest.fixture
def plugins(monkeypatch):
    """Register plug-ins for one test: ``plugins("name=module:factory", ...)``; forgotten afterwards."""
    monkeypatch.syspath_prepend(str(EXAMPLE))
    reset_domains()

    def register(*items: str) -> None:
        monkeypatch.setenv("TRACE_GYM_DOMAINS", ",".join(items))
        reset_domains()

    yield register
    monkeypatch.delenv("TRACE_GYM_DOMAINS", raising=False)
    reset_domains()


# ------------------------------------------------------------------------ broken plug-ins (factories)
def _tool(**kw):
    base = {"name": "look", "description": "Look.", "parameters": {"type": "object", "properties": {}}, "fn": lambda db: "ok"}
    return DomainTool(**{**base, **kw})


def _world(rng: random.Random) -> dict:
    return {"things": {"t1": {"id": "t1", "n": rng.randrange(10)}}}


def raising_factory():
    raise RuntimeError("the shop's database is closed")


def half_domain():
    class Half:
        name = "half"

        def tool_names(self):
            return frozenset({"look"})

    return Half()


def bad_schema_domain():
    tool = _tool(parameters={"type": "object", "properties": {"x": {"type": "no-such-type"}}})
    return DictDomain("badschema", [tool], _world, "prompt")


def drifting_domain():
    return DictDomain("drifting", [_tool()], lambda rng: {"things": {"t": {"n": random.random()}}}, "prompt")


def good_domain():
    return DictDomain("good", [_tool()], _world, "prompt")


def listed_user_tools_domain():
    class Listed(DictDomain):
        def user_tool_names(self):
            return ["look"]

    return Listed("listed", [_tool()], _world, "prompt")


def _error(name: str) -> str:
    with pytest.raises(DomainPluginError) as info:
        get_domain(name)
    message = str(info.value)
    assert "\n" not in message and repr(name) in message, message
    return message


def test_a_plugin_serves_specs_like_a_builtin(plugins):
    from trace_gym.capabilities.env import CapabilityEnv
    from trace_gym.core.tools import ToolSet

    plugins(SHOP)
    assert "bookshop" in domain_names() and {"retail", "toolsandbox"} <= set(domain_names())
    shop = get_domain("bookshop")
    assert shop is get_domain("bookshop")  # built once
    assert shop.write_tools() == {"place_order", "cancel_order"}
    assert isinstance(shop.tools(["get_order"]).toolset, ToolSet)
    env = CapabilityEnv(SPECS / "cap-shop-cancel-policy.yaml")
    for seed in range(4):
        env.reset(seed=seed)
        for action in env.reference_actions():
            _, reward, done, _, info = env.step(action)
        assert done and reward == 1.0, info
    tasks = env.task_source
    assert tasks.domain == "bookshop" and tasks.gold("3").write_tools == {"place_order", "cancel_order"}


def test_the_example_domain_is_deterministic_and_a_failed_write_changes_nothing(plugins):
    plugins(SHOP)
    shop = get_domain("bookshop")
    a, b = shop.generate(random.Random(5)), shop.generate(random.Random(5))
    assert a == b and a != shop.generate(random.Random(6))
    backend = shop.backend(a)
    before = backend.fingerprint()
    res = backend.call("place_order", {"customer_id": "C200", "book_ids": ["B100", "no-such-book"]})
    assert res.error and "no-such-book" in res.content and backend.fingerprint() == before
    assert backend.call("get_order", {"order_id": 7}).error  # schema: a string
    ok = backend.call("cancel_order", {"order_id": "O3000"})
    assert not ok.error and backend.fingerprint() != before and backend.fork().fingerprint() == before
    assert backend.initial_db()["orders"]["O3000"]["status"] == "placed"


@pytest.mark.parametrize(("item", "expected"), [
    ("broken=tests.test_byo_domain:raising_factory", "the factory tests.test_byo_domain:raising_factory raised "
                                                      "RuntimeError: the shop's database is closed"),
    ("half=tests.test_byo_domain:half_domain", "without the CapabilityDomain method(s) ['write_tools'"),
    ("badschema=tests.test_byo_domain:bad_schema_domain", "tools() raised SchemaError"),
    ("drifting=tests.test_byo_domain:drifting_domain", "generate() is not deterministic"),
    ("gone=tests.no_such_module:make", "cannot import module 'tests.no_such_module'"),
    ("missing=tests.test_byo_domain:no_such_factory", "has no attribute 'no_such_factory'"),
    ("other=tests.test_byo_domain:good_domain", "the domain calls itself 'good'"),
    ("listed=tests.test_byo_domain:listed_user_tools_domain", "user_tool_names() must return a set of tool names"),
])
def test_a_broken_plugin_is_one_line_naming_it(plugins, item, expected):
    plugins(item)
    name = item.split("=")[0]
    message = _error(name)
    assert expected in message and "TRACE_GYM_DOMAINS" in message, message


def test_a_name_registered_twice_names_both_sides(plugins):
    plugins("retail=tests.test_byo_domain:good_domain")
    message = _error("retail")
    assert "built-in retail domain" in message and "retail=tests.test_byo_domain:good_domain" in message
    plugins("good=tests.test_byo_domain:good_domain", "good=tests.test_byo_domain:bad_schema_domain")
    message = _error("good")
    assert "good_domain" in message and "bad_schema_domain" in message
    plugins("good=tests.test_byo_domain:good_domain", "good=tests.test_byo_domain:good_domain")
    assert get_domain("good").name == "good"  # the same factory twice is one registration


def test_unknown_and_malformed_names(plugins):
    plugins("oops", SHOP)
    with pytest.raises(ValueError, match=r"unknown capability domain 'nope'; expected one of \[.*'bookshop'.*"
                                         r"TRACE_GYM_DOMAINS item 'oops' is not NAME=MODULE:FACTORY"):
        get_domain("nope")


def test_spec_errors_name_the_spec_and_the_domain(plugins, tmp_path):
    import yaml

    from trace_gym.capabilities.spec import SpecError, load_spec

    plugins(SHOP)
    doc = yaml.safe_load((SPECS / "cap-shop-cancel-policy.yaml").read_text())
    for domain, tools, where, words in [
        ("bookshop", ["get_order", "refund_order"], "tools[1]", ["unknown bookshop tool 'refund_order'"]),
        ("bookstore", doc["tools"], "domain", ["unknown capability domain 'bookstore'", "'bookshop'"]),
    ]:
        path = tmp_path / "cap-shop-cancel-policy.yaml"
        path.write_text(yaml.safe_dump({**doc, "domain": domain, "tools": tools}))
        with pytest.raises(SpecError) as info:
            load_spec(path)
        assert info.value.where == where and str(path) in str(info.value)
        assert all(w in str(info.value) for w in words), str(info.value)


def test_the_cli_reports_a_broken_plugin_in_one_line(plugins, tmp_path, capsys):
    from trace_gym.analysis.taxonomy import TAXONOMY
    from trace_gym.cli import main

    plugins("broken=tests.test_byo_domain:raising_factory")
    caps = tmp_path / "capabilities.json"
    caps.write_text(json.dumps({"format": "trace-gym/capabilities@1", "selected": ["multi-step-completion"],
                                "candidates": [c.to_dict() for c in TAXONOMY]}))
    rc = main(["synthesize", str(caps), "--domain", "broken", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 1 and len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in err, err
    assert "'broken'" in lines[0] and "RuntimeError: the shop's database is closed" in lines[0]


def test_synthesis_uses_the_domains_own_specs(plugins, tmp_path, monkeypatch):
    from trace_gym.analysis.taxonomy import TAXONOMY
    from trace_gym.capabilities.spec import load_spec
    from trace_gym.synthesis import synthesize

    plugins(SHOP)
    monkeypatch.setattr("trace_gym.capabilities.entries.spec_dirs", lambda: [SPECS])
    doc = {"format": "trace-gym/capabilities@1", "selected": ["multi-step-completion", "precondition-verification"],
           "candidates": [c.to_dict() for c in TAXONOMY]}
    outcomes = synthesize(doc, "bookshop", tmp_path)
    assert [(o.status, o.template) for o in outcomes] == [("template", "cap-shop-order-and-cancel"),
                                                         ("template", "cap-shop-cancel-policy")]
    spec = load_spec(outcomes[0].path)
    assert spec.domain == "bookshop" and spec.id == "syn-multi-step-completion-bookshop"


@pytest.mark.model
@pytest.mark.slow
def test_the_example_runs_the_whole_loop_with_the_tiny_model(private_dir):
    need("torch")
    need("trl")
    need("peft")

    need_smollm2()  # the tiny model borrows SmolLM2's tokenizer
    env = {k: v for k, v in os.environ.items() if k not in ("TRACE_GYM_DOMAINS", "TRACE_GYM_ENVS_DIR")}
    out = private_dir / "byo"
    proc = subprocess.run([sys.executable, str(EXAMPLE / "run_loop.py"), "--model", "tiny", "--out", str(out)],
                          cwd=private_dir, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["envs"] == ["trace/cap-shop-cancel-policy-v0", "trace/cap-shop-order-and-cancel-v0"]
    assert summary["analysis"]["synthesized_for"] and summary["synthesis"]
    syn = [f"trace/{s}-v0" for s in summary["synthesis"].values()]
    assert set(summary["calibration"]) == set(syn) and all(0 <= v <= 1 for v in summary["calibration"].values())
    assert set(summary["eval"]) == {"base", "adapter:bookshop"}
    assert set(summary["card"]) == set(summary["envs"]) | set(syn)
    assert all(0 <= row["mean"] <= 1 and row["episodes"] == 2 for row in summary["card"].values())
    assert (out / "adapters" / "bookshop" / "adapter_model.safetensors").exists()
    assert (out / "eval" / "comparison.json").exists() and (out / "card.json").exists()


def test_the_plugin_check_asks_for_every_method_the_protocol_declares():
    """``PROTOCOL_METHODS`` is read from :class:`CapabilityDomain` itself, so the check cannot lag behind it."""
    from trace_gym.capabilities.domains import CapabilityDomain, TelecomDomain, get_domain
    from trace_gym.capabilities.plugins import PROTOCOL_METHODS

    declared = {n for n in CapabilityDomain.__dict__ if callable(getattr(CapabilityDomain, n)) and not n.startswith("_")}
    assert set(PROTOCOL_METHODS) == declared and "user_tool_names" in PROTOCOL_METHODS
    for name in ("retail", "toolsandbox"):  # single control: the user has no tools of their own
        assert get_domain(name).user_tool_names() == frozenset()
    assert "toggle_airplane_mode" in TelecomDomain().user_tool_names()
