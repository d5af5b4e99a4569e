"""SmolLM2's own tool-call format: rendering, choice by chat template, and the parser reading it back."""

from __future__ import annotations

import gymnasium as gym
import pytest

from tests.extras import need
from trace_gym.core.toolcalls import parse_action
from trace_gym.policies.prompting import format_calls, render_chat, resolve_tool_format, tool_instructions

TOOLS = [{"type": "function", "function": {"name": "write_note", "description": "Store a note.", "parameters": {
    "type": "object", "properties": {"key": {"type": "string"}, "text": {"type": "string"}}, "required": ["key"]}}}]
MESSAGES = [
    {"role": "system", "content": "You keep notes."},
    {"role": "user", "content": "Save 'a'."},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_0", "type": "function", "function": {"name": "write_note", "arguments": "{\"key\": \"a\", \"text\": \"b\"}"}},
        {"id": "call_1", "type": "function", "function": {"name": "write_note", "arguments": "{\"key\": \"c\"}"}}]},
    {"role": "tool", "tool_call_id": "call_0", "name": "write_note", "content": "saved"},
]


class _Tok:
    """Just enough of a tokenizer for the format choice."""

    def __init__(self, template):
        self.chat_template = template


def test_smollm2_calls_round_trip_through_the_parser():
    calls = [("write_note", {"key": "a", "text": "b \u00e9 </tool_call>"}), ("lookup", {})]
    text = format_calls(calls, "smollm2")
    assert text.startswith("<tool_call>[\n") and text.endswith("\n]</tool_call>")
    parsed = parse_action(text)
    assert parsed.error is None and parsed.calls == calls
    # what SmolLM2 writes: one list, on one line or several, optionally after text
    parsed = parse_action('Sure.\n<tool_call>[{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {}}]</tool_call>')
    assert parsed.calls == [("a", {"x": 1}), ("b", {})] and parsed.content == "Sure."


@pytest.mark.parametrize("action, message", [
    ("<tool_call>[]</tool_call>", "empty list calls nothing"),
    ('<tool_call>[{"name": "a", "arguments": {}}, 3]</tool_call>', "call 2: expected a JSON object"),
    ('<tool_call>[{"arguments": {}}]</tool_call>', 'no string "name"'),
    ("<tool_call>[" + ", ".join(['{"name": "a"}'] * 65) + "]</tool_call>", "more than 64 tool calls"),
])
def test_malformed_smollm2_lists_are_format_errors(action, message):
    parsed = parse_action(action)
    assert parsed.calls == [] and message in parsed.error


def test_a_smollm2_list_runs_its_calls_in_order_and_a_bad_one_changes_nothing():
    env = gym.make("trace/cap-ts-state-dependency-v0", disable_env_checker=True)
    env.reset(seed=0, options={"scenario_seed": 0, "hint": False})
    before = env.unwrapped.state_fingerprint()
    _, _, _, _, info = env.step('<tool_call>[{"name": "set_cellular_service_status", "arguments": {"on": true}}, 7]</tool_call>')
    assert info.get("action_error") and env.unwrapped.state_fingerprint() == before
    _, _, _, _, info = env.step(format_calls([("set_low_battery_mode_status", {"on": False}),
                                              ("set_cellular_service_status", {"on": True})], "smollm2"))
    names = [c["function"]["name"] for c in info["messages"][-3]["tool_calls"]]
    assert names == ["set_low_battery_mode_status", "set_cellular_service_status"]
    assert [m["role"] for m in info["messages"][-2:]] == ["tool", "tool"]
    env.close()


def test_auto_picks_smollm2_for_smollm2s_template_and_hermes_otherwise(tokenizer):
    assert resolve_tool_format(tokenizer) == "smollm2"
    assert resolve_tool_format(_Tok("{% for m in messages %}{{ m.content }}{% endfor %}")) == "hermes"
    assert resolve_tool_format(_Tok(None)) == "hermes"
    assert resolve_tool_format(tokenizer, "hermes") == "hermes"
    with pytest.raises(ValueError, match="tool_format"):
        resolve_tool_format(tokenizer, "xml")


def test_smollm2_prompt_lists_tools_and_shows_earlier_calls_in_its_format(tokenizer):
    prompt = render_chat(tokenizer, MESSAGES, TOOLS, native=False, tool_listing="json", tool_format="smollm2")
    assert '<tools>[{"name": "write_note", "description": "Store a note."' in prompt
    assert "<tool_call>[\n" in prompt.split("<|im_start|>assistant\n")[1]  # the earlier call, as a list
    assert ('<tool_call>[\n{"name": "write_note", "arguments": {"key": "a", "text": "b"}},\n'
            '{"name": "write_note", "arguments": {"key": "c"}}\n]</tool_call>') in prompt
    assert "<tool_response>\nsaved\n</tool_response>" in prompt and prompt.endswith("<|im_start|>assistant\n")
    compact = tool_instructions(TOOLS, "compact", "smollm2")
    assert "<tools>\n- write_note(key: string, text?: string): Store a note.\n</tools>" in compact
    # the instructions' example is a template, not a call a model could copy verbatim into a valid action
    example = compact[compact.index("<tool_call>"):compact.index("</tool_call>") + len("</tool_call>")]
    assert '"name": <a function listed above>' in example
    assert not parse_action(example).calls


def test_policy_and_training_renderer_agree_on_the_format(tokenizer):
    need("torch")
    from trace_gym.policies.hf import SMALL_MODEL_SAMPLING, HFPolicy, tiny_test_model
    from trace_gym.train.chat import ChatRenderer

    model, tok = tiny_test_model(seed=0)
    policy = HFPolicy(model, tok, max_new_tokens=2)
    renderer = ChatRenderer(tok)
    assert policy.tool_format == renderer.tool_format == "smollm2"
    assert policy.render_prompt(MESSAGES, TOOLS) == renderer.prompt_text(MESSAGES, TOOLS)
    assert HFPolicy(model, tok, tool_format="hermes").render_prompt(MESSAGES, TOOLS) != policy.render_prompt(MESSAGES, TOOLS)
    assert SMALL_MODEL_SAMPLING == {"temperature": 0.7, "top_p": 0.9}
