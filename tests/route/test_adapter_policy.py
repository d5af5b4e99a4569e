import json

import pytest

from tests.extras import need

torch = need("torch")
peft = need("peft")

from trace_gym.policies.hf import HFPolicy, tiny_test_model  # noqa: E402
from trace_gym.route import NO_ADAPTER  # noqa: E402
from trace_gym.route.policy import AdapterPolicy, RoutedPolicy  # noqa: E402
from trace_gym.route.registry import AdapterRegistry  # noqa: E402


class KeywordRouter:
    """A deterministic router: the first label whose keyword occurs in the first user message."""

    name = "keyword"

    def __init__(self, rules):
        self.rules = rules
        self.labels = [lab for _, lab in rules]
        self.seen_tools = []

    def route(self, messages, tools=None):
        self.seen_tools.append(tools)
        if tools is not None and not tools:  # nothing offered: the base model says so
            return NO_ADAPTER
        text = next((m["content"] for m in messages if m["role"] == "user"), "") or ""
        return next((lab for kw, lab in self.rules if kw in text), NO_ADAPTER)


def _make_adapter(path, seed):
    model, _ = tiny_test_model(seed=0)
    cfg = peft.LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", init_lora_weights=False)
    torch.manual_seed(seed)
    pm = peft.get_peft_model(model, cfg)
    pm.save_pretrained(str(path))


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    root = tmp_path_factory.mktemp("adapters")
    entries = []
    for i, name in enumerate(["cap-a", "cap-b"]):
        _make_adapter(root / name, seed=10 + i)
        entries.append({"name": name, "path": name, "capability": name, "env_id": f"trace/{name}-v0", "base_model": "tiny"})
    (root / "manifest.json").write_text(json.dumps({"adapters": entries}))
    return AdapterRegistry(root / "manifest.json")


def _policy(registry):
    model, tok = tiny_test_model(seed=0)
    return AdapterPolicy(HFPolicy(model, tok, greedy=True, max_new_tokens=6), registry)


def _logits(policy, text="hello"):
    ids = policy.base.tokenizer(text, return_tensors="pt")["input_ids"]
    with policy._ctx(), torch.no_grad():
        return policy.base.model(input_ids=ids).logits[0, -1]


def test_registry_resolves_relative_paths(registry):
    assert registry.names() == ["cap-a", "cap-b"]
    assert registry["cap-a"].path.is_dir()
    assert registry.by_capability() == {"cap-a": "cap-a", "cap-b": "cap-b"}
    with pytest.raises(KeyError, match="not in"):
        registry["nope"]


def test_switching_adapters_changes_the_model_and_none_is_the_base(registry):
    pol = _policy(registry)
    pol.use(NO_ADAPTER)
    base = _logits(pol)
    model, _ = tiny_test_model(seed=0)
    ids = pol.base.tokenizer("hello", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        ref = model(input_ids=ids).logits[0, -1]
    assert torch.allclose(base, ref, atol=1e-5)
    pol.use("cap-a")
    a = _logits(pol)
    pol.use("cap-b")
    b = _logits(pol)
    assert not torch.allclose(a, base) and not torch.allclose(a, b)
    with pytest.raises(KeyError):
        pol.use("cap-z")


def test_routed_policy_routes_once_per_conversation(registry):
    pol = RoutedPolicy(_policy(registry), KeywordRouter([("refund", "cap-a"), ("flight", "cap-b")]))
    convo = [{"role": "system", "content": "s"}, {"role": "user", "content": "I want a refund"}]
    tools = [{"type": "function", "function": {"name": "refund_order", "parameters": {"type": "object"}}}]
    pol.reset(1)
    pol.act(convo, tools)
    pol.act(convo + [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "my flight"}], tools)
    assert [d["adapter"] for d in pol.decisions] == ["cap-a"]
    assert pol.router.seen_tools == [tools]  # the router sees the offered tools, once per conversation
    out = pol.act_batch([(convo, tools), ([{"role": "user", "content": "hello"}], tools)], seeds=[2, 3])
    assert len(out) == 2 and all(isinstance(x, str) for x in out)
    assert [d["adapter"] for d in pol.decisions] == ["cap-a", "cap-a", NO_ADAPTER]
    # the same request and seed with other tools is another conversation: routed again, here to the base model
    pol.act_batch([(convo, [])], seeds=[2])
    assert [d["adapter"] for d in pol.decisions][-1] == NO_ADAPTER


def _unmerged_logits(registry, name, text="hello"):
    model, tok = tiny_test_model(seed=0)
    pm = peft.PeftModel.from_pretrained(model, str(registry[name].path))
    ids = tok(text, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        return pm(input_ids=ids).logits[0, -1]


def test_merged_adapters_compute_what_peft_computes_and_swap_back_to_the_exact_base(registry):
    pol = _policy(registry)
    assert pol.merged and not isinstance(pol.base.model, peft.PeftModel)  # a plain model: base speed
    original = {n: p.detach().clone() for n, p in pol.base.model.named_parameters()}
    for name in ("cap-a", "cap-b"):
        pol.use(name)
        assert torch.allclose(_logits(pol), _unmerged_logits(registry, name), atol=1e-4)
    pol.use(NO_ADAPTER)
    assert all(torch.equal(p, original[n]) for n, p in pol.base.model.named_parameters())


def test_merged_and_unmerged_policies_act_alike(registry):
    def make(merge, fixed=None):
        model, tok = tiny_test_model(seed=0)
        return AdapterPolicy(HFPolicy(model, tok, greedy=True, max_new_tokens=8), registry, fixed=fixed, merge=merge)

    requests = [([{"role": "user", "content": f"note number {i}"}], []) for i in range(3)]
    merged, unmerged = make(True, "cap-b"), make(False, "cap-b")
    assert merged.merged and not unmerged.merged
    assert merged.act_batch(requests, seeds=[0, 1, 2]) == unmerged.act_batch(requests, seeds=[0, 1, 2])
    assert list(merged._weights) == [NO_ADAPTER, "cap-b"]  # a fixed policy merges its one adapter only


def test_an_adapter_for_another_base_model_is_one_clear_error(registry, tmp_path):
    from trace_gym.route.policy import AdapterError

    other, _ = tiny_test_model(seed=0, hidden_size=48)
    peft.get_peft_model(other, peft.LoraConfig(r=2, target_modules="all-linear")).save_pretrained(str(tmp_path / "wide"))
    (tmp_path / "manifest.json").write_text(json.dumps({"adapters": [{"name": "wide", "path": "wide", "base_model": "other"}]}))
    model, tok = tiny_test_model(seed=0)
    with pytest.raises(AdapterError, match="adapter 'wide' .* does not fit the base model") as info:
        AdapterPolicy(HFPolicy(model, tok, greedy=True), AdapterRegistry(tmp_path / "manifest.json"))
    assert "\n" not in str(info.value)


def test_routed_policy_names_the_requests_past_the_context_in_its_own_order(registry):
    from trace_gym.policies.base import ContextExceeded

    pol = RoutedPolicy(_policy(registry), KeywordRouter([("refund", "cap-a"), ("flight", "cap-b")]))
    limit = pol.adapters.base.model.config.max_position_embeddings
    huge = "word " * (limit + 10)
    requests = [([{"role": "user", "content": "flight " + huge}], []), ([{"role": "user", "content": "refund"}], []),
                ([{"role": "user", "content": "refund " + huge}], []), ([{"role": "user", "content": "hi"}], [])]
    with pytest.raises(ContextExceeded) as info:
        pol.act_batch(requests, seeds=[0, 1, 2, 3])
    assert info.value.rows == [0, 2] and all(n >= limit for n in info.value.lengths)


def test_base_weights_are_in_place_only_inside_base_weights(registry):
    pol = _policy(registry)
    pol.use(NO_ADAPTER)
    base = _logits(pol)
    pol.use("cap-a")
    adapted = _logits(pol)
    with pol.base_weights():
        assert torch.equal(_logits(pol), base)
    assert torch.equal(_logits(pol), adapted) and pol.active == "cap-a"
