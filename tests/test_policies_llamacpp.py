"""The llama.cpp backend: PEFT adapters as llama.cpp LoRA GGUFs, and the policy against transformers.

The writer's tests need only ``gguf`` (which transformers' GGUF loading needs too); the
policy's need ``llama-cpp-python`` and the packaged SmolLM2 GGUF and skip without them.
"""

import json

import numpy as np
import pytest

from tests.extras import need, need_smollm2

torch = need("torch")
peft = need("peft")
gguf = need("gguf")

from trace_gym.policies.hf import HFPolicy, ModelUnavailableError, tiny_test_model  # noqa: E402
from trace_gym.policies.lora_gguf import write_lora_gguf  # noqa: E402


def _adapter(path, model, seed=3, **cfg):
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", init_lora_weights=False, **cfg)
    torch.manual_seed(seed)
    pm = peft.get_peft_model(model, config)
    pm.save_pretrained(str(path))
    return pm


def _strong_adapter(path, model, r):
    """A random LoRA on every linear layer of ``model`` that moves its logits a long way, saved at ``path``."""
    torch.manual_seed(0)
    pm = peft.get_peft_model(model, peft.LoraConfig(r=r, lora_alpha=2 * r, target_modules="all-linear",
                                                    init_lora_weights=False))
    with torch.no_grad():
        for name, p in pm.named_parameters():
            if "lora_B" in name:
                p.mul_(0.5)
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


def _smollm2_and_gguf():
    """SmolLM2 (model, tokenizer) and the GGUF it was loaded from; the test skips without them."""
    from trace_gym.policies.hf import load_smollm2
    from trace_gym.policies.hf_models import smollm2_gguf_path

    need_smollm2()
    return (*load_smollm2(), smollm2_gguf_path())


def test_a_merged_gguf_is_the_model_with_the_adapter_merged(tmp_path):
    """The merged GGUF, read back by transformers (which undoes llama.cpp's rotary row order), gives the
    logits of the PEFT model: the update lands in the right rows of every weight, metadata intact."""
    from transformers import AutoModelForCausalLM

    from trace_gym.policies.gguf_weights import float_gguf

    model, tok, source = _smollm2_and_gguf()
    pm = _strong_adapter(tmp_path / "a", model, r=4)
    ids = tok("The capital of France is Paris. The capital of Spain is", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        tuned = pm(input_ids=ids).logits[0]
        with pm.disable_adapter():
            plain = pm(input_ids=ids).logits[0]
    pm.unload()
    out = float_gguf(source, tmp_path / "m" / "merged.gguf", weight_type="F16", adapter_dir=tmp_path / "a")
    merged = AutoModelForCausalLM.from_pretrained(str(out.parent), gguf_file=out.name, dtype=torch.float32)
    with torch.no_grad():
        got = merged(input_ids=ids).logits[0]
    effect = torch.nn.functional.cosine_similarity((got - plain).flatten(), (tuned - plain).flatten(), dim=0)
    assert effect > 0.999 and (tuned - plain).abs().max() > 1.0  # a large update, carried over whole
    assert torch.equal(got.argmax(-1), tuned.argmax(-1)) and (got - tuned).abs().max() < 0.1  # float16 rounding only
    src, dst = gguf.GGUFReader(str(source)), gguf.GGUFReader(str(out))
    assert [t.name for t in dst.tensors] == [t.name for t in src.tensors]
    # every quantized matrix is now float16 (the embedding too); norms stay float32
    assert {t.name: t.tensor_type.name for t in dst.tensors} == {
        t.name: "F16" if t.tensor_type.name.startswith("Q") else t.tensor_type.name for t in src.tensors}
    assert len(dst.fields["tokenizer.ggml.tokens"].data) == len(src.fields["tokenizer.ggml.tokens"].data)
    # an adapter of another model: one clear error, nothing left behind
    _adapter(tmp_path / "tiny", tiny_test_model(seed=0)[0])
    with pytest.raises(ValueError, match="does not fit"):
        float_gguf(source, tmp_path / "bad" / "bad.gguf", adapter_dir=tmp_path / "tiny")
    assert not (tmp_path / "bad" / "bad.gguf").exists() and not list(tmp_path.glob("bad/.bad.gguf.*"))
    with pytest.raises(ValueError, match="weight_type must be auto or one of BF16, F16, F32"):
        float_gguf(source, tmp_path / "bad" / "bad.gguf", weight_type="Q4_1", adapter_dir=tmp_path / "a")


def test_a_q8_0_copy_is_the_float32_merge_rounded_to_8_bit_blocks(tmp_path):
    """``weight_type="Q8_0"``: every matrix the source quantized is stored in 8-bit blocks of the float32
    merge (each weight within half a step of its block's scale), everything else as in the source."""
    import numpy as np
    from gguf.quants import dequantize

    from trace_gym.policies.gguf_weights import float_gguf, merge_into_float_gguf

    model, _, source = _smollm2_and_gguf()
    _strong_adapter(tmp_path / "a", model, r=4)
    exact = gguf.GGUFReader(str(float_gguf(source, tmp_path / "f32.gguf", weight_type="F32", adapter_dir=tmp_path / "a")))
    q8 = gguf.GGUFReader(str(float_gguf(source, tmp_path / "q8.gguf", weight_type="q8_0", adapter_dir=tmp_path / "a")))
    src = {t.name: t.tensor_type.name for t in gguf.GGUFReader(str(source)).tensors}
    assert {t.name: t.tensor_type.name for t in q8.tensors} == {n: "Q8_0" if k.startswith("Q") else k for n, k in src.items()}
    want = {t.name: t for t in exact.tensors}
    for t in q8.tensors:
        if t.tensor_type.name != "Q8_0":
            continue
        w = np.asarray(want[t.name].data, dtype=np.float32).reshape(-1, 32)
        got = dequantize(t.data, t.tensor_type).reshape(-1, 32)
        step = np.abs(w).max(axis=1, keepdims=True) / 127  # the block's scale (stored as float16: 127 steps of its rounding)
        assert np.all(np.abs(got - w) <= (0.5 + 127 * 2.0**-11) * step + 1e-7), t.name
    with pytest.raises(ValueError, match=r"q8.gguf stores blk\.0\.\w+\.weight as Q8_0: merge into a float copy"):
        merge_into_float_gguf(tmp_path / "q8.gguf", tmp_path / "a", tmp_path / "bad.gguf")


def test_merging_into_a_float_copy_patches_only_the_adapted_weights(tmp_path):
    """:func:`merge_into_float_gguf` gives the file :func:`float_gguf` writes with the adapter merged, up to one
    rounding of the float type (the copy's weights were rounded once already), from a folder or a model in
    memory alike; an adapter of another model or a 4-bit source is refused by name, nothing left behind."""
    from trace_gym.policies.gguf_weights import float_gguf, merge_into_float_gguf

    model, _, source = _smollm2_and_gguf()
    pm = _strong_adapter(tmp_path / "a", model, r=4)
    plain = float_gguf(source, tmp_path / "plain.gguf", weight_type="F16")
    whole = float_gguf(source, tmp_path / "whole.gguf", weight_type="F16", adapter_dir=tmp_path / "a")
    patched = merge_into_float_gguf(plain, tmp_path / "a", tmp_path / "out" / "patched.gguf")
    assert merge_into_float_gguf(plain, pm, tmp_path / "memory.gguf").read_bytes() == patched.read_bytes()
    assert patched.stat().st_size == plain.stat().st_size
    want = {t.name: np.array(t.data, dtype=np.float32) for t in gguf.GGUFReader(str(whole)).tensors}
    got = {t.name: np.array(t.data, dtype=np.float32) for t in gguf.GGUFReader(str(patched)).tensors}
    before = {t.name: np.array(t.data, dtype=np.float32) for t in gguf.GGUFReader(str(plain)).tensors}
    assert list(got) == list(want)
    adapted = [n for n in got if not np.array_equal(got[n], before[n])]
    assert len(adapted) == 7 * 30  # seven projections in each of SmolLM2's 30 layers
    for name in got:  # the copy rounded the weight once (half a float16 step of it), the merge rounds the sum
        scale = np.maximum(np.abs(before[name]), np.abs(want[name]))
        assert np.all(np.abs(got[name] - want[name]) <= 2.0**-10 * scale + 2.0**-24), name
    pm.unload()
    _adapter(tmp_path / "tiny", tiny_test_model(seed=0)[0])
    with pytest.raises(ValueError, match="does not fit"):
        merge_into_float_gguf(plain, tmp_path / "tiny", tmp_path / "bad" / "bad.gguf")
    with pytest.raises(ValueError, match="merge into a float copy"):
        merge_into_float_gguf(source, tmp_path / "a", tmp_path / "bad" / "bad.gguf")
    assert not (tmp_path / "bad").exists()  # refused before anything is written


# ----------------------------------------------------------------------------- the policy on llama.cpp
@pytest.fixture(scope="module")
def smollm2():
    need("llama_cpp")
    from trace_gym.policies.hf import load_smollm2

    need_smollm2()
    return load_smollm2()


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


@pytest.mark.parametrize("weights,merge", [("file", False), ("auto", True), ("auto", False), ("q8_0", True)])
def test_llama_cpp_agrees_with_transformers_with_and_without_an_adapter(smollm2, tmp_path, weights, merge):
    """On the GGUF's 4-bit weights (``file``, activations quantized too), on their float copy (``auto``) or on
    that copy in 8-bit blocks (``q8_0``), with the adapter as a llama.cpp LoRA or merged into the weights."""
    from trace_gym.policies.llamacpp import LlamaCppPolicy
    from trace_gym.route.policy import AdapterPolicy
    from trace_gym.route.registry import AdapterRegistry

    model, tok = smollm2
    lcp = LlamaCppPolicy.smollm2(greedy=True, max_new_tokens=12, batch_size=2, weight_type=weights)
    text = lcp.render_prompt(PROMPT, [])
    a, b = _next_logits_llamacpp(lcp, text), _next_logits_hf(model, tok, text)
    # measured (on a CPU with AVX512-BF16, where auto is BF16): 0.99999 on the float copy, 0.99995 on the 4-bit file,
    # 0.99989 in 8-bit blocks
    assert torch.nn.functional.cosine_similarity(a, b, dim=0) > (0.9999 if weights == "auto" else 0.999)
    assert a.argmax() == b.argmax()
    # an adapter that moves the logits a long way: llama.cpp must move them the same way
    pm = _strong_adapter(tmp_path / "cap-x", model, r=8)
    tuned = _next_logits_hf(pm, tok, text)
    pm.unload()
    (tmp_path / "manifest.json").write_text(json.dumps({"adapters": [
        {"name": "cap-x", "path": "cap-x", "capability": "x", "env_id": "trace/x-v0", "base_model": "smollm2"}]}))
    served = AdapterPolicy(lcp, AdapterRegistry(tmp_path / "manifest.json"), fixed="cap-x", merge=merge)
    assert served.serving and served.merged == merge and lcp.adapter == "cap-x" and (lcp.merged == "cap-x") == merge
    c = _next_logits_llamacpp(lcp, text)
    # the adapter's effect, both ways; measured: 0.972 as a LoRA on the 4-bit file (0.80 with the query and key
    # rows left in PEFT's order), 0.994 as a LoRA on the BF16 copy, 0.989 merged into it (BF16 rounds the sum),
    # 0.965 merged into the Q8_0 copy (each weight's 8-bit step is as large as much of the update)
    assert torch.nn.functional.cosine_similarity(tuned - b, c - a, dim=0) > (0.98 if weights == "auto" else 0.95)
    served.use("none")
    for slot in lcp.engine.slots:  # decode from scratch, as ``a`` was: on float weights a reused prefix rounds
        slot.tokens = []  # the last token's logits differently (see the next test)
    assert torch.allclose(_next_logits_llamacpp(lcp, text), a, atol=1e-3)  # switched back: the plain model
    lcp.close()


def test_copies_the_cache_dropped_are_made_again_when_the_policy_switches_back(smollm2, tmp_path, monkeypatch):
    """The model cache is bounded (:mod:`trace_gym.policies.gguf_cache`): a merged policy going back to the plain
    model, or to its LoRA adapters, after their files were pruned meanwhile makes them again and acts as before."""
    import trace_gym.policies.llamacpp as llamacpp

    monkeypatch.setattr(llamacpp, "model_cache_dir", lambda: tmp_path / "models")
    model, _ = smollm2
    lcp = llamacpp.LlamaCppPolicy.smollm2(greedy=True, max_new_tokens=4, batch_size=1, weight_type="q8_0")
    text = lcp.render_prompt(PROMPT, [])
    plain = _next_logits_llamacpp(lcp, text)
    _strong_adapter(tmp_path / "cap-x", model, r=4).unload()
    lcp.load_adapter("cap-x", tmp_path / "cap-x")
    lcp.merge_adapter("cap-x", tmp_path / "cap-x")
    cache = tmp_path / "models" / "llamacpp"
    assert sorted(p.name.rsplit(".", 2)[1] for p in cache.glob("*.gguf")) == ["lora", "merged-q8_0", "q8_0"]
    for p in cache.glob("*.gguf"):
        p.unlink()
    lcp.use_adapter(None)
    assert sorted(p.name.rsplit(".", 2)[1] for p in cache.glob("*.gguf")) == ["lora", "q8_0"]
    for slot in lcp.engine.slots:
        slot.tokens = []
    assert torch.allclose(_next_logits_llamacpp(lcp, text), plain, atol=1e-3)
    lcp.use_adapter("cap-x")
    assert lcp.adapter == "cap-x" and not torch.allclose(_next_logits_llamacpp(lcp, text), plain, atol=1e-3)
    lcp.close()


@pytest.mark.parametrize("weights", ["file", "F32"])
def test_a_reused_prefix_is_exact_on_the_4bit_file_and_close_on_floats(smollm2, weights):
    """The same prompt decoded from scratch and again on top of its cached prefix: the 4-bit file's integer dot
    products give the same logits; float kernels sum one row in another order than many (measured: 0.012 in
    float32, 0.034 in float16, 0.21 in bfloat16, logits around 20)."""
    from trace_gym.policies.llamacpp import LlamaCppPolicy

    lcp = LlamaCppPolicy.smollm2(greedy=True, max_new_tokens=4, batch_size=1, weight_type=weights)
    text = lcp.render_prompt(PROMPT, [])
    fresh, reused = _next_logits_llamacpp(lcp, text), _next_logits_llamacpp(lcp, text)
    if weights == "file":
        assert torch.equal(fresh, reused)
    else:
        assert (fresh - reused).abs().max() < 0.1 and fresh.argmax() == reused.argmax()
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
    # on the 4-bit file with the flash-attention kernel, whose logits do not depend on a slot's cached prefix
    # (float weights' do, slightly, and so does the plain attention kernel's sum order)
    sampled = LlamaCppPolicy.smollm2(max_new_tokens=16, batch_size=2, n_ctx=512, seed=5, weight_type="file",
                                     flash_attn=True)
    first = sampled.act_batch([(PROMPT, []), (other, [])], seeds=[3, 4])
    assert sampled.act_batch([(other, []), (PROMPT, [])], seeds=[4, 3]) == first[::-1]  # a row's draw is its own
    lcp.close()
    sampled.close()


def test_drafts_keep_the_greedy_tokens_and_take_several_per_step(smollm2):
    """Prompt-lookup drafts, checked as extra positions of a step: on the 4-bit file with the flash-attention
    kernel (whose logits do not depend on the batch) greedy actions are those of plain decoding, in fewer
    steps, in lock step and served alike."""
    from trace_gym.policies.llamacpp import LlamaCppPolicy

    class Queue:  # the two requests, each answered once
        def __init__(self):
            self.waiting, self.answers = [(k, r, k) for k, r in enumerate(requests)], {}

        def take(self):
            return self.waiting.pop(0) if self.waiting else None

        def answer(self, key, action):
            self.answers[key] = action

        def reject(self, key, error):
            raise AssertionError(f"request {key} rejected: {error}")

    text = "call lookup_flight(origin='SFO', destination='JFK', date='2024-05-01', seats=2, cabin='economy')"
    copy = [{"role": "user", "content": f"Repeat this line exactly, twice: {text}"}]
    requests = [(copy, []), (PROMPT, [])]
    opts = dict(greedy=True, max_new_tokens=48, batch_size=2, n_ctx=1024, weight_type="file", flash_attn=True)
    plain, ahead = LlamaCppPolicy.smollm2(lookahead=0, **opts), LlamaCppPolicy.smollm2(**opts)
    assert ahead.lookahead == 8 and plain.lookahead == 0
    want = plain.act_batch(requests, seeds=[0, 1])
    assert ahead.act_batch(requests, seeds=[0, 1]) == want
    a, b = plain.decode_stats, ahead.decode_stats
    assert a.drafted_tokens == 0 and 0 < b.accepted_tokens <= b.drafted_tokens
    assert b.generated_tokens == a.generated_tokens and b.decode_steps < a.decode_steps
    queue = Queue()
    ahead.serve(queue)
    assert [queue.answers[k] for k in range(2)] == want
    with pytest.raises(ValueError, match="lookahead"):
        LlamaCppPolicy.smollm2(lookahead=-1)
    with pytest.raises(ValueError, match="draft_cost"):
        LlamaCppPolicy.smollm2(draft_cost=1.5)
    plain.close()
    ahead.close()


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
    pol = policy_from_spec("llamacpp:smollm2@file", batch_size=1)
    assert pol.weight_type == "file" and pol.model_path == pol.source_path
    pol.close()
    pol = policy_from_spec("llamacpp:smollm2@q8_0", batch_size=1)
    assert pol.weight_type == "q8_0" and pol.model_path.name.endswith(".q8_0.gguf")
    pol.close()
    with pytest.raises(ValueError, match="one of auto, file, bf16, f16, f32, q8_0"):
        policy_from_spec("llamacpp:smollm2@q4_0")


def test_without_llama_cpp_the_spec_says_how_to_install_it(monkeypatch):
    import sys

    from trace_gym.policies import policy_from_spec

    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # as on a machine without the package
    with pytest.raises(ModelUnavailableError, match=r"pip install 'trace-gym\[llamacpp\]'"):
        policy_from_spec("llamacpp:smollm2")
    with pytest.raises(ValueError, match="weights must be one of auto, file, bf16, f16, f32"):
        policy_from_spec("llamacpp:smollm2@q4_1")


# ----------------------------------------------------------------------------- GRPO sampling in llama.cpp
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_peft_model_in_memory_writes_the_gguf_its_saved_folder_writes(tmp_path, dtype):
    model, _ = tiny_test_model(seed=0)
    pm = _adapter(tmp_path / "a", model.to(dtype))
    a = write_lora_gguf(tmp_path / "a", tmp_path / "folder.gguf", architecture="llama", heads=4, kv_heads=2)
    b = write_lora_gguf(pm, tmp_path / "memory.gguf", architecture="llama", heads=4, kv_heads=2)
    ra, rb = gguf.GGUFReader(str(a)), gguf.GGUFReader(str(b))
    assert [t.name for t in ra.tensors] == [t.name for t in rb.tensors]
    for x, y in zip(ra.tensors, rb.tensors, strict=True):
        np.testing.assert_array_equal(np.array(x.data), np.array(y.data))


def test_grpo_samples_in_llama_cpp_from_the_adapter_as_it_is_now(smollm2, tmp_path):
    """``backend=llamacpp``: every call merges the trained LoRA as it is then into the float weights (the previous
    engine closed, no runtime LoRA), the logits follow the PEFT model's, and a sampled turn keeps its end-of-turn
    token."""
    from types import SimpleNamespace

    from accelerate import Accelerator

    from trace_gym.policies.hf_models import smollm2_gguf_path
    from trace_gym.train.generation import LlamaCppSampler

    model, tok = smollm2
    pm = _strong_adapter(tmp_path / "a", model, r=8)
    trainer = SimpleNamespace(accelerator=Accelerator(cpu=True), model=pm, processing_class=tok,
                              args=SimpleNamespace(per_device_train_batch_size=2), eos_token_ids=[tok.eos_token_id],
                              temperature=1.0, top_k=0, top_p=1.0, min_p=None)
    text = tok.apply_chat_template(PROMPT, tokenize=False, add_generation_prompt=True)
    ids = tok(text, add_special_tokens=False)["input_ids"]

    def llama_logits(engine):
        seen = []
        engine.decode([ids], max_new_tokens=[1], pick=lambda lg, idx: seen.append(lg.clone()) or lg.argmax(-1),
                      stop=SimpleNamespace(add=lambda produced, tok, limit, **kw: produced.append(tok) or True))
        for slot in engine.slots:  # from scratch each time (float weights round a reused prefix differently)
            slot.tokens = []
        return seen[0][0]

    sampler = LlamaCppSampler(smollm2_gguf_path())
    try:
        sampler(trainer)
        first = SimpleNamespace(engine=sampler.engine)
        cos = torch.nn.functional.cosine_similarity
        assert cos(llama_logits(first.engine), _next_logits_hf(pm, tok, text), dim=0) > 0.999
        with torch.no_grad():  # an optimizer step moves the adapter
            for name, p in pm.named_parameters():
                if "lora_B" in name:
                    p.add_(0.05 * torch.randn_like(p))
        now = _next_logits_hf(pm, tok, text)
        generate = sampler(trainer)
        second = SimpleNamespace(engine=sampler.engine)
        assert second.engine is not first.engine and first.engine._ctx is None  # reopened on the new weights
        assert not second.engine._adapters and second.engine.share_prompts
        assert cos(llama_logits(second.engine), now, dim=0) > 0.999
        torch.manual_seed(0)
        out = generate([ids, ids], [40, 3])
        assert len(out[1]) <= 3 and all(t < second.engine.n_vocab for row in out for t in row)
        stops = set(trainer.eos_token_ids)
        assert all(t not in stops for row in out for t in row[:-1])  # an end-of-turn token ends the turn, kept
    finally:
        sampler.close()
        pm.unload()
    assert sampler.engine is None and second.engine._ctx is None  # closed by its owner


def test_backend_llamacpp_says_what_it_needs(monkeypatch, tmp_path):
    import sys

    from trace_gym.train.config import ConfigError, TrainConfig
    from trace_gym.train.trainer import _llamacpp_sampler

    with pytest.raises(ConfigError, match="sampler_gguf is for backend=llamacpp"):
        TrainConfig(model="smollm2", sampler_gguf="x.gguf").validate()
    cfg = TrainConfig(model="tiny", backend="llamacpp").validate()
    from types import SimpleNamespace

    from trace_gym.train.generation import LlamaCppSampler

    penalised = SimpleNamespace(args=SimpleNamespace(), repetition_penalty=1.2)  # a setting only generate honours
    with pytest.raises(ValueError, match="use backend=transformers"):
        LlamaCppSampler(tmp_path / "never-read.gguf")(penalised)
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # as on a machine without the package
    with pytest.raises(ModelUnavailableError, match=r"pip install 'trace-gym\[llamacpp\]'"):
        _llamacpp_sampler(cfg)
    monkeypatch.undo()
    need("llama_cpp")
    with pytest.raises(ValueError, match="set sampler_gguf=PATH"):
        _llamacpp_sampler(cfg)
    with pytest.raises(FileNotFoundError, match="no GGUF file at"):
        _llamacpp_sampler(TrainConfig(model="tiny", backend="llamacpp", sampler_gguf=str(tmp_path / "no.gguf")))


def test_attention_heads_come_from_the_model_gguf_and_a_lora_gguf_is_refused(tmp_path):
    from trace_gym.policies.hf_models import smollm2_gguf_path
    from trace_gym.policies.lora_gguf import gguf_attention_heads

    need_smollm2()
    source = smollm2_gguf_path()
    assert gguf_attention_heads(source) == gguf_attention_heads(str(source)) == ("llama", 9, 3)
    model, _ = tiny_test_model(seed=0)
    _adapter(tmp_path / "a", model)
    lora = write_lora_gguf(tmp_path / "a", tmp_path / "a.gguf", architecture="llama", heads=4, kv_heads=2)
    with pytest.raises(ValueError, match="gives no llama.attention.head_count"):
        gguf_attention_heads(lora)


def test_shared_prompts_are_prefilled_once_and_decode_as_apart(smollm2):
    """``share_prompts``: rows that begin alike store that beginning once: a repeated prompt costs no prefill,
    a row extending another only its own tokens, taken from cells the other's slot holds (copied) or from
    the other's entries of this call (a chain of such rows too), and a row that is a prefix of another still
    gets its own last token.  Every row's next-token logits are those of the row decoded alone from scratch,
    up to the rounding of kernels that differ with the batch's size (measured: cosine 0.9994 or more; a row
    that lost its first 10 tokens of context scores 0.984)."""
    from types import SimpleNamespace

    from trace_gym.policies.decoding import DecodeStats
    from trace_gym.policies.hf_models import smollm2_gguf_path
    from trace_gym.policies.llamacpp import LlamaCppEngine

    _, tok = smollm2
    text = tok.apply_chat_template(PROMPT, tokenize=False, add_generation_prompt=True)
    x = tok(text, add_special_tokens=False)["input_ids"]
    other = x[:-6] + tok(" Spain?", add_special_tokens=False)["input_ids"]
    xa = x + tok("Paris", add_special_tokens=False)["input_ids"]
    xab = xa + tok(" is the capital.", add_special_tokens=False)["input_ids"]

    def decode(engine, rows):
        seen, stats = [], DecodeStats()
        engine.decode(rows, max_new_tokens=[1] * len(rows), pick=lambda lg, idx: seen.append(lg.clone()) or lg.argmax(-1),
                      stop=SimpleNamespace(add=lambda produced, t, limit, **kw: produced.append(t) or True), stats=stats)
        return seen[0], stats.prefilled_tokens

    apart = LlamaCppEngine(smollm2_gguf_path(), slots=1, n_ctx=512)
    shared = LlamaCppEngine(smollm2_gguf_path(), slots=4, n_ctx=512, share_prompts=True)

    def alone(row):
        apart.slots[0].tokens = []
        return decode(apart, [row])[0][0]

    def same(a, row):
        b = alone(row)
        return torch.nn.functional.cosine_similarity(a, b, dim=0) > 0.999 and a.argmax() == b.argmax()

    try:
        got, n = decode(shared, [x, x, other, x])
        assert n == len(x) + len(other) - (len(x) - 6)  # one prompt, and the other's own ending
        assert all(same(got[k], row) for k, row in enumerate([x, x, other, x]))
        for slot in shared.slots:
            slot.tokens, slot.used = [], 0
        decode(shared, [x])  # one slot holds x
        for slot in shared.slots:
            slot.used = 0
        # row 0 continues its slot's x; row 1 copies x from it and shares row 0's new entries; row 2 copies x
        # from row 1's slot and shares row 1's entries (row 0's too: the same entries) for all of xab
        got, n = decode(shared, [xa, xab, xab])
        assert n == len(xab) - len(x)
        assert all(same(got[k], row) for k, row in enumerate([xa, xab, xab]))
        for slot in shared.slots:  # only the slot holding xab counts now
            if slot.tokens != xab:
                slot.tokens = []
        head = xab[: len(x) - 2]  # a prefix of the held row: all but its last token copied, the last decoded
        got, n = decode(shared, [xab + [xab[-1]], head])
        assert n == 1 + 1
        assert same(got[1], head) and same(got[0], xab + [xab[-1]])
    finally:
        apart.close()
        shared.close()


def test_serving_continuously_plays_the_lock_step_episodes_on_the_4bit_file(smollm2):
    """``serve`` answers each request as soon as its action is complete and refills the slot at once; greedy on
    the 4-bit file (whose logits do not depend on what a slot held) every episode is the lock-step one.  A
    round that mixes one row's prefill with other rows' next tokens can round logits differently from a
    lock-step batch (llama.cpp's kernels depend on the batch), so sampled draws are not compared; what
    serving gains in speed is measured by benchmarks/rollout_speed.py."""
    import gymnasium as gym

    from tests.helpers_envs import ENV_ID
    from trace_gym.policies.llamacpp import LlamaCppPolicy
    from trace_gym.rollout import rollout_queue

    class LockStepOnly:  # the same policy without ``serve``
        accepts_seeds = True

        def __init__(self, inner):
            self.inner, self.policy_id = inner, inner.policy_id

        def act(self, messages, tools):
            return self.inner.act(messages, tools)

        def act_batch(self, requests, seeds=None):
            return self.inner.act_batch(requests, seeds=seeds)

    def play(policy):
        return rollout_queue([gym.make(ENV_ID, max_steps=4) for _ in range(3)], policy, list(range(5)))

    opts = dict(max_new_tokens=24, batch_size=3, n_ctx=1024, seed=2, weight_type="file", greedy=True)
    lock_policy, served_policy = LlamaCppPolicy.smollm2(**opts), LlamaCppPolicy.smollm2(**opts)
    lock, served = play(LockStepOnly(lock_policy)), play(served_policy)
    assert [(t.seed, t.actions, t.rewards) for t in served] == [(t.seed, t.actions, t.rewards) for t in lock]
    a, b = lock_policy.decode_stats, served_policy.decode_stats
    assert b.generated_tokens == a.generated_tokens and b.rows == a.rows
    lock_policy.close()
    served_policy.close()
