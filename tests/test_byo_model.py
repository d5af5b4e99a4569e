"""A model of one's own whose chat template cannot carry tool calls is refused on one clear line, by every verb
that loads it, before anything is written; one whose template can is accepted (the README's loop runs such a
model end to end: tests/test_cli_loop.py)."""

from __future__ import annotations

import pytest

from tests.extras import need, need_smollm2
from tests.helpers_models import save_chat_model

need("torch")
need("transformers")

pytestmark = pytest.mark.model

# Gemma's way: no system role at all
NO_SYSTEM = ("{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
             "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}")
# a template that renders the user's turns only
USER_ONLY = "{% for m in messages %}{% if m['role'] == 'user' %}{{ m['content'] }}{% endif %}{% endfor %}"


@pytest.fixture
def no_library_bars():
    """As `trace-gym` runs (HF_HUB_DISABLE_PROGRESS_BARS=1 unless set): no "Loading weights" bar on stderr."""
    from transformers.utils import logging

    was = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()
    yield
    if was:
        logging.enable_progress_bar()


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    need_smollm2()  # the tiny model borrows SmolLM2's tokenizer
    root = tmp_path_factory.mktemp("models")
    return {name: save_chat_model(root / name, chat_template=t)
            for name, t in (("no-template", None), ("no-system", NO_SYSTEM), ("user-only", USER_ONLY))}


@pytest.mark.parametrize("name, why", [
    ("no-template", "has no chat template"),
    ("no-system", "cannot carry tool calls: it fails on a conversation with a tool call and its result "
                  "(System role not supported)"),
    ("user-only", "cannot carry tool calls: it leaves out the tool list and the tool call;"),
])
def test_a_template_that_cannot_carry_tool_calls_is_one_error_line(models, name, why, tmp_path, capsys,
                                                                     toolsandbox_data, no_library_bars):
    from trace_gym.cli import main

    folder = models[name]
    run = tmp_path / "run"
    verbs = {
        "rollout": ["rollout", "trace/toolsandbox-v0", "--run", str(run), "--policy", f"hf:{folder}", "--per-group", "1"],
        "rollout --out": ["rollout", "trace/toolsandbox-v0", "--policy", f"hf:{folder}", "--out", str(tmp_path / "t.jsonl")],
        "eval": ["eval", "--env", "trace/toolsandbox-v0", "--policy", "base", "--model", f"hf:{folder}", "--limit", "1",
                 "--out", str(tmp_path / "eval")],
        "train": ["train", "--env", "trace/cap-ts-state-dependency-v0", "--model", str(folder), "--out",
                  str(tmp_path / "adapters" / "a"), "--steps", "1", "--no-progress"],
    }
    for verb, argv in verbs.items():
        rc = main(argv)
        err = capsys.readouterr().err
        assert rc in (1, 2) and err.count("\n") == 1 and err.startswith("error: "), (verb, err)
        assert why in err and "chat template" in err and str(folder) in err, (verb, err)
        assert "Traceback" not in err and "--debug" not in err, (verb, err)
    assert not run.exists() and not (tmp_path / "t.jsonl").exists() and not (tmp_path / "adapters").exists()


def test_templates_that_carry_tool_calls_pass_the_check():
    from trl.chat_template_utils import qwen2_5_chat_template

    from trace_gym.policies.hf import load_smollm2_tokenizer
    from trace_gym.policies.prompting import check_tool_template, native_tools, resolve_tool_format

    need_smollm2()
    tok = load_smollm2_tokenizer()  # SmolLM2's template ignores tools: listed in the system message, calls as text
    assert not native_tools(tok)
    check_tool_template(tok, native=False, tool_format=resolve_tool_format(tok))
    tok.chat_template = qwen2_5_chat_template  # Qwen2.5's renders tools, calls and results itself
    assert native_tools(tok)
    check_tool_template(tok, native=True, tool_format="hermes")
