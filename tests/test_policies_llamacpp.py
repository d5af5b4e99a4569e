"""The llama.cpp backend: PEFT adapters as llama.cpp LoRA GGUFs, and the policy against transformers.

The writer's tests need only ``gguf`` (which transformers' GGUF loading needs too); the
policy's need ``llama-cpp-python`` and the packaged SmolLM2 GGUF and skip without them.
"""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
peft = pytest.importorskip("peft")
gguf = pytest.importorskip("gguf")

from trace_gym.policies.hf import HFPolicy, ModelUnavailableError, tiny_test_model  # noqa: E402
from trace_gym.policies.lora_gguf import write_lora_gguf  # noqa: E402


def _adapter(path, model, seed=3, **cfg):
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", init_lora_weights=False, **cfg)
    torch.manual_seed(seed)
    pm = peft.get_peft_model(model, config)
    pm.save_pretrained(str(path))
    return pm


def _unrope(b, heads):  # the inverse of llama.cpp's row order for rotary embeddings
    out, r = b.shape
    return b.reshape(heads, out // heads // 2, 2, r).swapaxes(1, 2).reshape(out, r)


def test_a_peft_adapter_becomes_a_llama_cpp_lora_gguf(tmp_path):
    model, _ = tiny_test_model(seed=0)
    pm = _adapter(tmp_path / "a", model)
    out = write_lora_gguf(tmp_path / "a", tmp_path / "a.gguf", architecture="llama", heads=4, kv_heads=2)
    reader = gguf.GGUFReader(str(out))
    text = {k: bytes(f.parts[f.data[0]]).decode() for k, f in reader.fields.items() if k in ("general.type", "adapter.type")}
    assert text == {"general.type": "adapter", "adapter.type": "lora"}
    alpha = reader.fields["adapter.lora.alpha"]
    assert float(alpha.parts[alpha.data[0]][0]) == 8.0
    tensors = {t.name: np.array(t.data).reshape([int(d) for d in reversed(t.shape)]) for t in reader.tensors}
    assert len(tensors) == 2 * 7 * 2  # A and B of seven projections in each of two layers
    state = {k: v.detach().numpy() for k, v in pm.state_dict().items() if "lora_" in k}
    q_a = state["base_model.model.model.layers.1.self_attn.q_proj.lora_A.default.weight"]
    q_b = state["base_model.model.model.layers.1.self_attn.q_proj.lora_B.default.weight"]
    k_b = state["base_model.model.model.layers.0.self_attn.k_proj.lora_B.default.weight"]
    v_b = state["base_model.model.model.layers.0.self_attn.v_proj.lora_B.default.weight"]
    np.testing.assert_array_equal(tensors["blk.1.attn_q.weight.lora_a"], q_a)  # r x in
    assert not np.array_equal(tensors["blk.1.attn_q.weight.lora_b"], q_b)  # rows in rotary order...
    np.testing.assert_array_equal(_unrope(tensors["blk.1.attn_q.weight.lora_b"], 4), q_b)  # ...of the 4 query heads
    np.testing.assert_array_equal(_unrope(tensors["blk.0.attn_k.weight.lora_b"], 2), k_b)  # and 2 key heads
    np.testing.assert_array_equal(tensors["blk.0.attn_v.weight.lora_b"], v_b)  # values keep their order


def test_adapters_llama_cpp_cannot_apply_are_refused_by_name(tmp_path):
    model, _ = tiny_test_model(seed=0)
    _adapter(tmp_path / "a", model)
    cfg = json.loads((tmp_path / "a" / "adapter_config.json").read_text())
    for key, value in (("use_dora", True), ("modules_to_save", ["lm_head"]), ("peft_type", "IA3")):
        (tmp_path / "a" / "adapter_config.json").write_text(json.dumps({**cfg, key: value}))
        with pytest.raises(ValueError, match=key if key != "peft_type" else "IA3"):
            write_lora_gguf(tmp_path / "a", tmp_path / "bad.gguf", architecture="llama", heads=4, kv_heads=2)
    assert not (tmp_path / "bad.gguf").exists() and not list(tmp_path.glob(".bad.gguf.*"))
    with pytest.raises(ValueError, match="not a PEFT adapter folder"):
        write_lora_gguf(tmp_path, tmp_path / "bad.gguf", architecture="llama", heads=4, kv_heads=2)


# ----------------------------------------------------------------------------- the policy on llama.cpp
@pytest.fixture(scope="module")
def smollm2():
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    from trace_gym.policies.hf import load_smollm2

    try:
        return load_smollm2()
    except ModelUnavailableError as exc:
        pytest.skip(str(exc))


PROMPT = [{"role": "system", "content": "You are a helpful assistant."},
          {"role": "user", "content": "What is the capital of France? Answer in one word."}]


def _next_logits_llamacpp(policy, text):
    seen = []

    def pick(logits, idx):
        seen.append(logits.clone())
        return logits.argmax(dim=-1)

    rows = policy._encode([text])
    policy.engine.decode(rows, max_new_tokens=[1], pick=pick, stop=policy.stop_rule)
    return seen[0][0]


def _next_logits_hf(model, tokenizer, text):
    ids = tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        return model(input_ids=ids).logits[0, -1].float()


def test_llama_cpp_agrees_with_transformers_with_and_without_an_adapter(smollm2, tmp_path):
    from trace_gym.policies.llamacpp import LlamaCppPolicy
    from trace_gym.route.policy import AdapterPolicy
    from trace_gym.route.registry import AdapterRegistry

    model, tok = smollm2
    lcp = LlamaCppPolicy.smollm2(greedy=True, max_new_tokens=12, batch_size=2)
    text = lcp.render_prompt(PROMPT, [])
    a, b = _next_logits_llamacpp(lcp, text), _next_logits_hf(model, tok, text)
    assert torch.nn.functional.cosine_similarity(a, b, dim=0) > 0.99 and a.argmax() == b.argmax()
    # an adapter that moves the logits a long way: llama.cpp must move them the same way
    config = peft.LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", init_lora_weights=False)
    torch.manual_seed(0)
    pm = peft.get_peft_model(model, config)
    with torch.no_grad():
        for name, p in pm.named_parameters():
            if "lora_B" in name:
                p.mul_(0.5)
    pm.save_pretrained(str(tmp_path / "cap-x"))
    tuned = _next_logits_hf(pm, tok, text)
    pm.unload()
    (tmp_path / "manifest.json").write_text(json.dumps({"adapters": [
        {"name": "cap-x", "path": "cap-x", "capability": "x", "env_id": "trace/x-v0", "base_model": "smollm2"}]}))
    served = AdapterPolicy(lcp, AdapterRegistry(tmp_path / "manifest.json"), fixed="cap-x")
    assert served.serving and lcp.adapter == "cap-x"
    c = _next_logits_llamacpp(lcp, text)
    # the adapter's effect, both ways (0.97 measured; 0.80 with the query and key rows left in PEFT's order)
    assert torch.nn.functional.cosine_similarity(tuned - b, c - a, dim=0) > 0.95
    served.use("none")
    assert torch.allclose(_next_logits_llamacpp(lcp, text), a, atol=1e-3)  # switched back: the plain model
    lcp.close()


def test_llama_cpp_acts_in_lock_step_reuses_prefixes_and_ends_long_prompts(smollm2):
    from trace_gym.policies.base import ContextExceeded
    from trace_gym.policies.llamacpp import LlamaCppPolicy

    model, tok = smollm2
    lcp = LlamaCppPolicy.smollm2(greedy=True, max_new_tokens=16, batch_size=2, n_ctx=512)
    hf = HFPolicy(model, tok, greedy=True, max_new_tokens=16)
    other = [PROMPT[0], {"role": "user", "content": "Name a colour."}]
    requests = [(PROMPT, []), (other, []), (PROMPT, [])]  # three rows through two slots
    got = lcp.act_batch(requests, seeds=[0, 1, 0])
    assert got[0] == got[2] and all(isinstance(g, str) and g for g in got)
    assert got[0].split()[0].strip(".").lower() == hf.act_batch([(PROMPT, [])], seeds=[0])[0].split()[0].strip(".").lower()
    before = lcp.decode_stats.prefilled_tokens
    again = lcp.act_batch([(PROMPT, [])], seeds=[0])
    assert again[0] == got[0]
    assert lcp.decode_stats.prefilled_tokens - before <= 1  # the slot held this prompt already
    long = [{"role": "user", "content": "word " * 600}]
    with pytest.raises(ContextExceeded) as info:
        lcp.act_batch([(PROMPT, []), (long, [])], seeds=[0, 0])
    assert info.value.rows == [1] and info.value.limit == 512
    sampled = LlamaCppPolicy.smollm2(max_new_tokens=16, batch_size=2, n_ctx=512, seed=5)
    first = sampled.act_batch([(PROMPT, []), (other, [])], seeds=[3, 4])
    assert sampled.act_batch([(other, []), (PROMPT, [])], seeds=[4, 3]) == first[::-1]  # a row's draw is its own
    lcp.close()
    sampled.close()


def test_a_spec_names_the_llama_cpp_backend(smollm2):
    from trace_gym.policies import policy_from_spec
    from trace_gym.policies.llamacpp import LlamaCppPolicy

    pol = policy_from_spec("llamacpp:smollm2", greedy=True, batch_size=2)
    assert isinstance(pol, LlamaCppPolicy) and pol.greedy and pol.batch_size == 2
    pol.close()
    with pytest.raises(ModelUnavailableError, match="no GGUF model file"):
        policy_from_spec("llamacpp:/nonexistent/model.gguf")
    with pytest.raises(ValueError, match="llamacpp:FILE.gguf"):
        policy_from_spec("llamacpp:")


def test_without_llama_cpp_the_spec_says_how_to_install_it(monkeypatch):
    import sys

    from trace_gym.policies import policy_from_spec

    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # as on a machine without the package
    with pytest.raises(ModelUnavailableError, match=r"pip install 'trace-gym\[llamacpp\]'"):
        policy_from_spec("llamacpp:smollm2")
