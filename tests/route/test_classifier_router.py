import pytest

from tests.extras import need

torch = need("torch")

from trace_gym.policies.hf import tiny_test_model  # noqa: E402
from trace_gym.route import NO_ADAPTER  # noqa: E402
from trace_gym.route.classifier import ClassifierRouter, build_prompt  # noqa: E402


def test_prompt_lists_labels_examples_and_none():
    p = build_prompt("refund my shoes", ["cap-a", "cap-b"], [("return the lamp", "cap-a")], {"cap-a": "refunds"})
    assert "- cap-a: refunds" in p and "- cap-b" in p and f"- {NO_ADAPTER}" in p
    assert p.endswith("Request: refund my shoes\nLabel:")
    assert "Request: return the lamp\nLabel: cap-a" in p


def test_label_logprobs_pick_a_label_deterministically():
    model, tok = tiny_test_model(seed=3)
    r = ClassifierRouter(model, tok, labels=["cap-refund-policy", "cap-structured-selection"])
    conv = [{"role": "user", "content": "I want my money back for the blender"}]
    s1, s2 = r.scores("I want my money back for the blender"), r.scores("I want my money back for the blender")
    assert s1 == s2 and set(s1) == {"cap-refund-policy", "cap-structured-selection", NO_ADAPTER}
    assert all(v < 0 for v in s1.values())
    assert r.route(conv) == max(s1, key=s1.get)
    assert r.route([{"role": "system", "content": "x"}]) == NO_ADAPTER


def test_scores_match_an_unbatched_computation():
    model, tok = tiny_test_model(seed=4)
    r = ClassifierRouter(model, tok, labels=["alpha", "beta-gamma"], normalize=False)
    prompt = build_prompt("q", ["alpha", "beta-gamma"], [])
    p_ids = tok(prompt, add_special_tokens=False)["input_ids"]
    for lab, got in r.scores("q").items():
        l_ids = tok(" " + lab, add_special_tokens=False)["input_ids"]
        ids = torch.tensor([p_ids + l_ids])
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=ids).logits.float(), -1)[0]
        want = sum(logp[len(p_ids) - 1 + j, t].item() for j, t in enumerate(l_ids))
        assert got == pytest.approx(want, abs=1e-4)
