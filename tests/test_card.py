"""``trace-gym card``: a policy's report card over every capability env of a domain (here the example
bookshop plug-in), its JSON and plot, and one ``error:`` line for bad input."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import gymnasium as gym
import pytest

from tests.extras import need, need_smollm2
from trace_gym.capabilities.domains import reset_domains
from trace_gym.cli import main

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "byo_domain"
SHOP_ENVS = ["trace/cap-shop-cancel-policy-v0", "trace/cap-shop-order-and-cancel-v0"]


@pytest.fixture
def shop(monkeypatch):
    """The example bookshop registered (domain and both specs) for one test, and removed afterwards."""
    from trace_gym.registration import ENTRIES
    from trace_gym.synthesis.register import register_spec_files

    monkeypatch.syspath_prepend(str(EXAMPLE))
    monkeypatch.setenv("TRACE_GYM_DOMAINS", "bookshop=bookshop_domain:make_domain")
    reset_domains()
    ids = register_spec_files(sorted((EXAMPLE / "specs").glob("*.yaml")))
    yield ids
    for i in ids:
        gym.registry.pop(i, None)
    ENTRIES[:] = [e for e in ENTRIES if e.id not in ids]
    reset_domains()


@pytest.fixture
def refuser(tmp_path):
    path = tmp_path / "refuse.txt"
    path.write_text("I'm sorry, but I can't help with that.\n" * 40)
    return path


def _one_error(rc: int, err: str, *words: str) -> None:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in err, (rc, err)
    assert all(w in lines[0] for w in words), lines[0]


def test_a_scripted_policy_gets_a_card(shop, refuser):
    from rich.console import Console

    from trace_gym.eval.card import capability_envs, card_table, report_card
    from trace_gym.policies import ScriptedPolicy

    assert capability_envs("bookshop") == SHOP_ENVS
    card = report_card("bookshop", ScriptedPolicy.from_file(refuser), tasks=4, trials=2)
    assert card["format"] == "trace-gym/card@1" and [r["env_id"] for r in card["rows"]] == SHOP_ENVS
    for row in card["rows"]:
        assert row["n_tasks"] == 4 and row["episodes"] == 8 and 0 <= row["low"] <= row["mean"] <= row["high"] <= 1
        assert row["floor"] is not None and 0 <= row["perfect_share"] <= 1
    cancel = card["rows"][0]
    assert cancel["spec_id"] == "cap-shop-cancel-policy" and "precondition" in cancel["capability"]
    assert cancel["mean"] == pytest.approx(cancel["floor"])  # a policy that only refuses scores its own floor
    console = Console(width=80, record=True)
    console.print(card_table(card))
    text = console.export_text()
    assert "cap-shop-order-and-cancel" in text and max(len(ln) for ln in text.splitlines()) <= 80


def test_the_cli_writes_json_and_a_plot(shop, refuser, tmp_path, capsys):
    out, png = tmp_path / "card" / "card.json", tmp_path / "card.png"
    rc = main(["card", "--policy", f"scripted:{refuser}", "--domain", "bookshop", "--episodes", "2", "--seeds", "0-1",
               "--json-out", str(out), "--plot", str(png), "--store", str(tmp_path / "episodes.jsonl")])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    card = json.loads(out.read_text())
    assert card["trials"] == 2 and card["spec"] == f"scripted:{refuser}" and len(card["rows"]) == 2
    assert "cap-shop-cancel-policy" in captured.out
    if importlib.util.find_spec("matplotlib") is not None:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    else:
        assert not png.exists() and "matplotlib is not installed" in captured.err
    # a second run reads every episode from the store
    assert main(["card", "--policy", f"scripted:{refuser}", "--domain", "bookshop", "--episodes", "2", "--seeds", "0-1",
                 "--json-out", str(out), "--store", str(tmp_path / "episodes.jsonl")]) == 0
    assert json.loads(out.read_text())["rows"] == card["rows"]


@pytest.mark.parametrize(("argv", "words"), [
    (["--domain", "no-such-domain"], ["unknown capability domain 'no-such-domain'", "'retail'"]),
    (["--domain", "bookshop", "--seeds", "x"], ["--seeds", "bad seed range 'x'"]),
    (["--domain", "bookshop", "--seeds", "3-1"], ["--seeds", "'3-1'"]),
    (["--domain", "bookshop", "--seeds", "0,2"], ["--seeds must be one seed or a contiguous range"]),
    (["--domain", "bookshop", "--episodes", "0"], ["--episodes must be >= 1"]),
    (["--domain", "bookshop", "--split", "nope"], ["no split 'nope'"]),
])
def test_bad_input_is_one_error_line(shop, refuser, capsys, argv, words):
    rc = main(["card", "--policy", f"scripted:{refuser}", *argv])
    _one_error(rc, capsys.readouterr().err, *words)


def test_a_domain_without_capability_envs(monkeypatch, refuser, capsys):
    monkeypatch.syspath_prepend(str(EXAMPLE))
    monkeypatch.setenv("TRACE_GYM_DOMAINS", "bookshop=bookshop_domain:make_domain")  # the domain, but no spec of it
    reset_domains()
    try:
        rc = main(["card", "--policy", f"scripted:{refuser}", "--domain", "bookshop"])
        _one_error(rc, capsys.readouterr().err, "the bookshop domain has no capability envs", "TRACE_GYM_ENVS_DIR")
    finally:
        reset_domains()


@pytest.mark.model
def test_the_tiny_model_gets_a_card(shop, tmp_path, capsys):
    need("torch")
    from trace_gym.policies.hf import tiny_test_model

    need_smollm2()
    model, tok = tiny_test_model(0)
    folder = tmp_path / "tiny"
    model.save_pretrained(str(folder))
    tok.save_pretrained(str(folder))
    out = tmp_path / "card.json"
    rc = main(["card", "--policy", f"hf:{folder}", "--domain", "bookshop", "--episodes", "2", "--max-new-tokens", "8",
               "--batch-size", "2", "--json-out", str(out)])
    assert rc == 0, capsys.readouterr().err
    card = json.loads(out.read_text())
    assert card["policy"] == f"hf:{folder}" and [r["env_id"] for r in card["rows"]] == SHOP_ENVS
    assert all(r["episodes"] == 2 and 0 <= r["mean"] <= 1 for r in card["rows"])


def test_an_unreadable_spec_file_is_a_card_error_not_silence(tmp_path, monkeypatch):
    """The card names each env's spec and capability from its spec file; a file that no longer reads is an error."""
    import trace_gym.registration as registration
    from trace_gym.eval.card import CardError, _spec_info
    from trace_gym.registration import EnvEntry

    spec = tmp_path / "cap-broken.yaml"
    spec.write_text("id: cap-broken\ncapability: Broken things\n", encoding="utf-8")
    entry = EnvEntry("trace/cap-broken-v0", "trace_gym.capabilities.env:CapabilityEnv", "broken", {"spec": str(spec)},
                     family="capability", domain="retail")
    monkeypatch.setattr(registration, "ENTRIES", [entry])
    assert _spec_info("trace/cap-broken-v0") == ("cap-broken", "Broken things")
    spec.write_text("id: [unclosed\n", encoding="utf-8")
    with pytest.raises(CardError, match="trace/cap-broken-v0: its spec file cannot be read"):
        _spec_info("trace/cap-broken-v0")
