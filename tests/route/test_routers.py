import pytest

pytest.importorskip("sentence_transformers")

from trace_gym.route import NO_ADAPTER, RetrievalRouter, RouterIndex  # noqa: E402
from trace_gym.route.embed import Embedder  # noqa: E402

EXAMPLES = {
    "cap-refund-policy": ["I want to return the shoes I got last week and get my money back",
                          "Please refund the blender from my delivered order to my gift card"],
    "cap-precondition-verification": ["Cancel my basic economy flight to Boston and refund me",
                                      "I need to change the date of my reservation for tomorrow's flight"],
    NO_ADAPTER: ["What is the status of my order?", "Hi, can you tell me my account balance?"],
}


@pytest.fixture(scope="module")
def router():
    emb = Embedder()
    index = RouterIndex(emb.model_name)
    for label, texts in EXAMPLES.items():
        index.add(texts, [label] * len(texts), [f"test:{i}" for i in range(len(texts))], emb.encode(texts))
    return RetrievalRouter(index, emb, k=3, min_similarity=0.2)


def conv(text):
    return [{"role": "system", "content": "policy"}, {"role": "assistant", "content": "Hi! How can I help you today?"},
            {"role": "user", "content": text}]


def test_real_embeddings_route_by_meaning(router):
    assert router.route(conv("The jacket I received doesn't fit, I'd like to send it back for a refund")) == "cap-refund-policy"
    assert router.route(conv("Can I cancel the economy ticket I booked for Friday?")) == "cap-precondition-verification"
    assert router.labels == ["cap-precondition-verification", "cap-refund-policy"]


def test_no_user_message_or_far_query_is_no_adapter(router):
    assert router.route([{"role": "system", "content": "x"}]) == NO_ADAPTER
    strict = RetrievalRouter(router.index, router.embedder, min_similarity=0.99)
    assert strict.route(conv("Quantum chromodynamics lattice simulations")) == NO_ADAPTER


def test_index_round_trip(router, tmp_path):
    router.index.save(tmp_path / "router_index")
    loaded = RouterIndex.load(tmp_path / "router_index")
    assert loaded.texts == router.index.texts and loaded.labels == router.index.labels
    assert (loaded.vectors == router.index.vectors).all()
    again = RetrievalRouter(loaded, router.embedder, k=3, min_similarity=0.2)
    q = conv("return my order for a refund please")
    assert again.route(q) == router.route(q)


def test_build_index_keeps_correct_trajectories_and_accuracy_report():
    from types import SimpleNamespace

    from trace_gym.route.build import build_index, routing_accuracy

    def traj(text, reward, seed):
        return SimpleNamespace(transcript=conv(text), messages=[], reward=reward, env_id="trace/x-v0", seed=seed)

    corpora = {
        "cap-refund-policy": [traj(t, 1.0, i) for i, t in enumerate(EXAMPLES["cap-refund-policy"])] + [traj("fail", 0.0, 9)],
        NO_ADAPTER: [traj(t, 1.0, i) for i, t in enumerate(EXAMPLES[NO_ADAPTER])],
    }
    index = build_index(corpora)
    assert "fail" not in index.texts and len(index.texts) == 4
    r = RetrievalRouter(index, k=3, min_similarity=0.0)
    rep = routing_accuracy(r, [(conv("refund my delivered order please"), "cap-refund-policy"),
                               (conv("where is my package, what's its status?"), NO_ADAPTER)])
    assert rep.n == 2 and rep.accuracy == 1.0
    assert rep.confusion == {"cap-refund-policy": {"cap-refund-policy": 1}, NO_ADAPTER: {NO_ADAPTER: 1}}
    with pytest.raises(ValueError, match="empty"):
        build_index({"x": [traj("a", 0.0, 0)]})
