"""HFPolicy with a tiny random-weight Llama (fast); one slow smoke test with the real SmolLM2."""

from __future__ import annotations

import json
import subprocess
import sys

import gymnasium as gym
import pytest

from tests.extras import need, need_smollm2

need("torch")
need("transformers")

try:
    from helpers_envs import ENV_ID
except ImportError:  # tests/ imported as a package
    from tests.helpers_envs import ENV_ID

from trace_gym.policies.hf import HFPolicy, tiny_test_model  # noqa: E402
from trace_gym.policies.prompting import template_messages  # noqa: E402
from trace_gym.rollout import TrajectoryStore, collect, rollout  # noqa: E402

pytestmark = pytest.mark.model

MESSAGES = [
    {"role": "system", "content": "You keep notes."},
    {"role": "user", "content": "Save 'a'."},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "call_0", "type": "function", "function": {"name": "write_note", "arguments": "{\"key\": \"a\", \"text\": \"b\"}"}}]},
    {"role": "tool", "tool_call_id": "call_0", "name": "write_note", "content": "saved note 'a'"},
]
TOOLS = [{"type": "function", "function": {"name": "write_note", "description": "Store a note.", "parameters": {"type": "object", "properties": {"key": {"type": "string"}, "text": {"type": "string"}}}}}]


@pytest.fixture(scope="module")
def tiny():
    import torch

    need_smollm2()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model gains nothing from threads on a shared machine
    try:
        yield tiny_test_model(seed=0)
    finally:
        torch.set_num_threads(threads)


def _policy(tiny, **kw):
    model, tok = tiny
    kw.setdefault("max_new_tokens", 6)
    return HFPolicy(model, tok, **kw)


def test_fallback_prompt_carries_tools_calls_and_results(tiny):
    p = _policy(tiny, tool_format="hermes")  # SmolLM2's own format is tested in tests/train/test_tool_format.py
    assert not p.supports_native_tools()  # SmolLM2's template ignores tools=
    prompt = p.render_prompt(MESSAGES, TOOLS)
    assert "- write_note(key?: string, text?: string): Store a note." in prompt and "<tools>" in prompt
    as_json = _policy(tiny, tool_listing="json", tool_format="hermes").render_prompt(MESSAGES, TOOLS)
    assert '"name": "write_note"' in as_json
    assert '<tool_call>\n{"name": "write_note", "arguments": {"key": "a", "text": "b"}}\n</tool_call>' in prompt
    assert "<tool_response>\nsaved note 'a'\n</tool_response>" in prompt
    assert prompt.endswith("<|im_start|>assistant\n")


def test_native_tool_template_gets_structured_calls(tiny):
    model, tok = tiny
    native = (
        "{% if tools %}TOOLS:{% for t in tools %}{{ t.function.name }};{% endfor %}\n{% endif %}"
        "{% for m in messages %}<{{ m.role }}>{{ m.content }}"
        "{% for c in m.tool_calls or [] %}[{{ c.function.name }} {{ c.function.arguments.key }}]{% endfor %}\n{% endfor %}"
        "{% if add_generation_prompt %}<assistant>{% endif %}"
    )
    saved = tok.chat_template
    tok.chat_template = native
    try:
        p = HFPolicy(model, tok, max_new_tokens=2)
        assert p.supports_native_tools()
        prompt = p.render_prompt(MESSAGES, TOOLS)
        assert prompt.startswith("TOOLS:write_note;")
        assert "[write_note a]" in prompt  # arguments handed to the template as a dict
        assert "<tool>saved note 'a'" in prompt
    finally:
        tok.chat_template = saved


def test_template_messages_fallback_without_system():
    out = template_messages([{"role": "user", "content": "x"}], TOOLS, native_tools=False)
    assert out[0]["role"] == "system" and "write_note" in out[0]["content"]
    assert out[1] == {"role": "user", "content": "x"}


def test_compact_tool_line_keeps_names_types_required_and_enums():
    from trace_gym.policies.prompting import compact_tool_line

    tool = {"type": "function", "function": {
        "name": "exchange", "description": "Exchange items. Long second sentence that is dropped.",
        "parameters": {"type": "object", "required": ["order_id", "item_ids"], "properties": {
            "order_id": {"type": "string", "description": "many words"},
            "item_ids": {"type": "array", "items": {"type": "string"}},
            "cabin": {"type": "string", "enum": ["economy", "business"]},
            "passenger": {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}},
        }}}}
    line = compact_tool_line(tool)
    assert line == ('- exchange(order_id: string, item_ids: list[string], cabin?: "economy"|"business", '
                    'passenger?: {name: string, age: integer}): Exchange items.')
    with pytest.raises(ValueError, match="tool_listing"):
        template_messages(MESSAGES, TOOLS, native_tools=False, tool_listing="yaml")


LONG_SYSTEM = "You keep notes for a library. " * 40  # well over the cache's 64-token minimum


def _conversation(turns: list[str]) -> list[dict]:
    msgs = [{"role": "system", "content": LONG_SYSTEM}]
    for i, t in enumerate(turns):
        msgs.append({"role": "user", "content": t})
        if i < len(turns) - 1:
            msgs.append({"role": "assistant", "content": f"noted {i}"})
    return msgs


def test_prefix_cache_gives_the_same_tokens_as_full_prefill(tiny):
    """Greedy decoding with cached prefixes (shared system prompt, then each row's own
    earlier turn, rows of different cached lengths in one batch) equals decoding
    every prompt from scratch."""
    model, tok = tiny
    cached = HFPolicy(model, tok, max_new_tokens=8, greedy=True, prefix_cache=True)
    plain = HFPolicy(model, tok, max_new_tokens=8, greedy=True, prefix_cache=False)
    rounds = [
        [(_conversation(["save a"]), TOOLS), (_conversation(["save b please"]), TOOLS)],
        [(_conversation(["save a", "and c"]), TOOLS), (_conversation(["save b please", "now d"]), TOOLS)],
        [(_conversation(["save a", "and c", "then e"]), TOOLS), (_conversation(["something new"]), TOOLS),
         (_conversation(["save b please", "now d", "f"]), TOOLS)],
    ]
    for requests in rounds:
        seeds = list(range(len(requests)))
        assert cached.act_batch(requests, seeds=seeds) == plain.act_batch(requests, seeds=seeds)
    stats = cached.prefix_stats
    assert stats["reused_tokens"] > stats["prefilled_tokens"] > 0
    assert plain.prefix_stats["reused_tokens"] == 0
    # entries are per adapter key: a switched adapter recomputes the shared prefix
    before = dict(stats)
    cached.act_batch(rounds[0], seeds=[0, 1])
    assert cached.prefix_stats["prefilled_tokens"] == before["prefilled_tokens"]  # same key: all reused
    cached.prefix_cache_key = "other"
    cached.act_batch(rounds[0], seeds=[0, 1])
    assert cached.prefix_stats["prefilled_tokens"] > before["prefilled_tokens"]
    cached.clear_prefix_cache()
    assert not cached._prefix_entries


def test_sampling_is_seeded_and_batch_independent(tiny):
    p = _policy(tiny, seed=3)
    other = [{"role": "user", "content": "a much longer and different conversation opening " * 3}]
    alone = p.act_batch([(MESSAGES, TOOLS)], seeds=[0])
    batched = p.act_batch([(other, []), (MESSAGES, TOOLS)], seeds=[5, 0])
    assert batched[1] == alone[0]
    assert p.act_batch([(MESSAGES, TOOLS)], seeds=[0]) == alone
    draws = {p.act_batch([(MESSAGES, TOOLS)], seeds=[s])[0] for s in range(4)}
    assert len(draws) > 1  # episode seeds change the sample
    assert _policy(tiny, seed=4).act_batch([(MESSAGES, TOOLS)], seeds=[0]) != alone
    # Chunking into forward passes of one prompt changes nothing.
    assert _policy(tiny, seed=3, batch_size=1).act_batch([(other, []), (MESSAGES, TOOLS)], seeds=[5, 0]) == batched


def test_greedy_and_token_limit(tiny):
    p = _policy(tiny, greedy=True, max_new_tokens=5)
    a = p.act(MESSAGES, TOOLS)
    p.reset(9)
    assert p.act(MESSAGES, TOOLS) == a  # greedy ignores seeds
    model, tok = tiny
    ids = tok(a, add_special_tokens=False)["input_ids"]
    assert 0 < len(ids) <= 6  # decode/re-encode may merge or split one token


def test_invalid_settings(tiny):
    with pytest.raises(ValueError):
        _policy(tiny, temperature=0.0)
    with pytest.raises(ValueError):
        _policy(tiny, max_new_tokens=0)
    with pytest.raises(ValueError):
        _policy(tiny, top_p=0.0)


def test_top_k_top_p_sampling_is_seeded_and_top_k_1_is_greedy(tiny):
    sampled = [_policy(tiny, top_k=5, top_p=0.9, temperature=0.7, seed=3).act(MESSAGES, TOOLS) for _ in range(2)]
    assert sampled[0] == sampled[1] and sampled[0]  # a fresh policy with the same seed samples the same text
    greedy = _policy(tiny, greedy=True).act(MESSAGES, TOOLS)
    assert _policy(tiny, top_k=1, temperature=0.7, seed=4).act(MESSAGES, TOOLS) == greedy  # one candidate: the argmax


def test_rollouts_with_the_tiny_model_are_reproducible(tiny, tmp_path):
    env = gym.make(ENV_ID, max_steps=3)
    a = rollout(env, _policy(tiny, seed=1), seed=2)
    b = rollout(env, _policy(tiny, seed=1), seed=2)
    assert a.actions == b.actions and a.done
    out = tmp_path / "t.jsonl"
    one = collect(ENV_ID, _policy(tiny, seed=1, policy_id="tiny"), [0, 1, 2], store=out, env_kwargs={"max_steps": 2})
    two = collect(ENV_ID, _policy(tiny, seed=1, policy_id="tiny"), [0, 1, 2], store=tmp_path / "u.jsonl", env_kwargs={"max_steps": 2}, batch_size=3)
    assert [t.actions for t in one] == [t.actions for t in two]
    assert len(TrajectoryStore(out).load()) == 3


def test_importing_policies_does_not_import_torch():
    code = (
        "import sys, trace_gym, trace_gym.rollout, trace_gym.policies, trace_gym.policies.hf, trace_gym.policies.prompting, "
        "trace_gym.policies.hf_models, "
        "trace_gym.policies.openai_compat; print(json.dumps(sorted(m for m in ('torch', 'transformers') if m in sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", "import json; " + code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


@pytest.mark.slow
def test_real_smollm2_generates():
    need_smollm2()
    p = HFPolicy.smollm2(device="cpu", max_new_tokens=8, greedy=True)
    assert p.model.config.model_type == "llama" and not hasattr(p.model.config, "quantization_config")
    hello = [{"role": "user", "content": "Say hello."}]
    text = p.act(hello, [])
    assert isinstance(text, str) and text.strip()
    # Left padding next to a longer prompt does not change the greedy answer.
    assert p.act_batch([(MESSAGES, TOOLS), (hello, [])])[1] == text


def test_greedy_batch_matches_transformers_generate(tiny):
    import torch

    model, tok = tiny
    p = _policy(tiny, greedy=True, max_new_tokens=6)
    prompts = [p.render_prompt(MESSAGES, TOOLS), p.render_prompt([{"role": "user", "content": "hi"}], [])]
    mine = p.generate(prompts)  # one left-padded batch
    for prompt, text in zip(prompts, mine, strict=True):
        enc = tok([prompt], return_tensors="pt", add_special_tokens=False)
        with torch.inference_mode():
            ref = model.generate(**enc, max_new_tokens=6, do_sample=False, pad_token_id=tok.pad_token_id)
        assert text == tok.decode(ref[0, enc["input_ids"].shape[1] :], skip_special_tokens=True)


def test_peft_wrapped_model_uses_the_base_models_forward_arguments(tiny):
    """Through a PEFT wrapper the policy still passes the cache by its current name and asks
    for the last position's logits only; a fresh LoRA (B = 0) leaves greedy output unchanged."""
    peft = need("peft")
    import copy

    model, tok = tiny
    base = HFPolicy(model, tok, max_new_tokens=6, greedy=True)
    wrapped = peft.get_peft_model(copy.deepcopy(model), peft.LoraConfig(r=2, target_modules=["q_proj", "v_proj"]))
    wrapped.eval()
    lora = HFPolicy(wrapped, tok, max_new_tokens=6, greedy=True)
    assert lora._forward_kwargs() == base._forward_kwargs()
    assert base._forward_kwargs()[1] == {"logits_to_keep": 1}
    requests = [(_conversation(["save a"]), TOOLS), (MESSAGES, TOOLS)]
    assert lora.act_batch(requests, seeds=[0, 1]) == base.act_batch(requests, seeds=[0, 1])


def test_an_episode_that_outgrows_the_context_ends_truncated_and_the_batch_goes_on(tmp_path):
    """Episodes whose prompt no longer fits the model's context end as truncated (scored as the env
    scores a truncated episode, reason ``context_length``); the others of the batch play on."""
    from trace_gym.rollout import CONTEXT_LENGTH

    model, tok = tiny_test_model(seed=0)
    policy = HFPolicy(model, tok, max_new_tokens=6, greedy=True, policy_id="tiny-short-context")
    env = gym.make(ENV_ID, patience=50, max_steps=12)
    _, info = env.reset(seed=0)
    first = len(tok(policy.render_prompt(info["messages"], info["tools"]), add_special_tokens=False)["input_ids"])
    model.config.max_position_embeddings = first + 60  # the first turns fit, later ones do not
    trajs = collect(ENV_ID, policy, [0, 1, 2, 3], store=tmp_path / "t.jsonl", batch_size=4,
                    env_kwargs={"patience": 50, "max_steps": 12})
    assert len(trajs) == 4 and all(t.done for t in trajs)
    cut = [t for t in trajs if t.termination_reason == CONTEXT_LENGTH]
    assert cut and all(t.truncated and t.reward_info.get("cut") == CONTEXT_LENGTH for t in cut)
    assert all(1 <= t.num_steps < 12 for t in cut)
    assert len(TrajectoryStore(tmp_path / "t.jsonl").load()) == 4
    # A prompt with no room at all is refused up front, naming its row.
    from trace_gym.policies.base import ContextExceeded

    long_prompt = [{"role": "user", "content": "word " * (first + 100)}]
    with pytest.raises(ContextExceeded) as exc:
        policy.act_batch([(MESSAGES, TOOLS), (long_prompt, [])], seeds=[0, 1])
    assert exc.value.rows == [1]


def test_stop_strings_end_the_action_and_never_appearing_costs_nothing(tiny):
    from trace_gym.policies.decoding import StopRule

    model, tok = tiny
    rule = StopRule(tok, [tok.eos_token_id], ["</tool_call>"])
    ids = tok('<tool_call>[{"name": "a", "arguments": {}}]</tool_call> and more', add_special_tokens=False)["input_ids"]
    ends = [rule.ends(ids[:n]) for n in range(1, len(ids) + 1)]
    first = ends.index("string")
    assert all(e is None for e in ends[:first])
    assert tok.decode(ids[: first + 1]).endswith("</tool_call>") or "</tool_call>" in tok.decode(ids[: first + 1])
    assert rule.cut_text('x</tool_call>\nrest') == "x</tool_call>"
    assert rule.ends([5, tok.eos_token_id]) == "token"
    with pytest.raises(ValueError):
        StopRule(tok, [], [""])
    with pytest.raises(ValueError):
        StopRule(tok, [], [])
    # A policy whose stop string never appears generates exactly what it does without one.
    never = _policy(tiny, greedy=True, max_new_tokens=8, stop=["\x00never\x00"])
    none = _policy(tiny, greedy=True, max_new_tokens=8, stop=[])
    assert never.act(MESSAGES, TOOLS) == none.act(MESSAGES, TOOLS)
    # SmolLM2's call format stops at its closing tag by default; hermes has no stop string.
    assert _policy(tiny).stop_rule.strings == ("</tool_call>",)
    assert _policy(tiny, tool_format="hermes").stop_rule.strings == ()


def test_lookahead_drafts_change_no_token_and_take_several_per_forward(tiny):
    """Prompt-lookup drafts checked in one forward give the tokens plain decoding gives (greedy and
    sampled, per-row seeds), with fewer forwards where the text repeats itself."""
    model, tok = tiny
    long = [{"role": "user", "content": "repeat after me: the cat sat on the mat, the cat sat on the mat, " * 3}]
    requests = [(long, []), (MESSAGES, TOOLS), ([{"role": "user", "content": "hi"}], [])]
    for kw in ({"greedy": True}, {"temperature": 0.8, "top_p": 0.95}):
        plain = HFPolicy(model, tok, max_new_tokens=40, lookahead=0, seed=5, **kw)
        ahead = HFPolicy(model, tok, max_new_tokens=40, lookahead=6, seed=5, **kw)
        assert ahead.act_batch(requests, seeds=[0, 1, 2]) == plain.act_batch(requests, seeds=[0, 1, 2])
        assert ahead.decode_stats.generated_tokens == plain.decode_stats.generated_tokens
    with pytest.raises(ValueError):
        HFPolicy(model, tok, lookahead=-1)


def test_lookahead_checks_drafts_against_the_logits_plain_decoding_computes(tiny):
    """A pick that copies a pattern from the prompt makes every draft right: each kept draft's logits
    (from one wider forward, rows of different lengths, rejected columns in between) equal the
    logits one-token-per-forward decoding computes at that position."""
    import torch

    from trace_gym.policies.decoding import StopRule, decode_rows

    model, tok = tiny
    pattern = tok("alpha beta gamma delta epsilon zeta eta theta", add_special_tokens=False)["input_ids"]
    rows = [tok("some opening words", add_special_tokens=False)["input_ids"] + pattern * 2,
            tok("a different and longer opening of the second row", add_special_tokens=False)["input_ids"] + pattern]

    def run(lookahead):
        seen = {0: [], 1: []}

        def pick(logits, idx):
            out = []
            for r, i in zip(logits, idx, strict=True):
                seen[i].append(r.clone())
                n = len(seen[i])
                out.append(pattern[(n - 1) % len(pattern)] if not (i == 1 and n % 7 == 0) else 5)  # row 1 breaks the pattern
            return torch.tensor(out)

        stats = __import__("trace_gym.policies.decoding", fromlist=["DecodeStats"]).DecodeStats()
        got = decode_rows(model, rows, max_new_tokens=30, pick=pick, stop=StopRule(tok, [tok.eos_token_id]),
                          pad_id=tok.pad_token_id, lookahead=lookahead, stats=stats)
        return got, seen, stats

    plain, plain_logits, plain_stats = run(0)
    ahead, ahead_logits, ahead_stats = run(6)
    assert ahead == plain
    assert ahead_stats.accepted_tokens > 20 and ahead_stats.decode_steps < 0.7 * plain_stats.decode_steps
    for i in (0, 1):
        assert len(ahead_logits[i]) == len(plain_logits[i]) == 30
        assert all(torch.allclose(a, b, atol=1e-4) for a, b in zip(ahead_logits[i], plain_logits[i], strict=True))
