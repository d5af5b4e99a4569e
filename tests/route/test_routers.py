import pytest

from tests.extras import need

need("sentence_transformers")

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
    rep = routing_accuracy(r, [(conv("refund my delivered order please"), None, "cap-refund-policy"),
                               (conv("where is my package, what's its status?"), None, NO_ADAPTER)])
    assert rep.n == 2 and rep.accuracy == 1.0
    assert rep.confusion == {"cap-refund-policy": {"cap-refund-policy": 1}, NO_ADAPTER: {NO_ADAPTER: 1}}
    with pytest.raises(ValueError, match="empty"):
        build_index({"x": [traj("a", 0.0, 0)]})


def _fn(name):
    return {"type": "function", "function": {"name": name, "description": "", "parameters": {"type": "object"}}}


def test_tool_names_reads_schemas_and_bare_names():
    from trace_gym.route import tool_names

    assert tool_names(None) is None
    assert tool_names([]) == []
    assert tool_names([_fn("b"), {"name": "a"}, _fn("b"), {"oops": 1}, "junk"]) == ["a", "b"]


def test_the_same_request_with_a_tool_withheld_routes_by_its_tools():
    """Two conversations open with the same words; one offers the tool that does the job, the other does not
    (the right answer there is to say no). Messages alone cannot tell them apart; the offered tools can."""
    from types import SimpleNamespace

    from trace_gym.route.build import build_index

    ask = "Remove the phone number +12453344098 from my contacts"
    full, withheld = [_fn("remove_contact"), _fn("search_contacts")], [_fn("search_contacts")]

    def traj(text, tools, seed):
        return SimpleNamespace(transcript=conv(text), messages=[], tools=tools, reward=1.0, env_id="trace/x-v0", seed=seed)

    index = build_index({"cap-multi": [traj(ask, full, 0)], NO_ADAPTER: [traj(ask, withheld, 1)]})
    assert index.tools == [["remove_contact", "search_contacts"], ["search_contacts"]]  # same text, kept twice
    r = RetrievalRouter(index, k=2, min_similarity=0.0)
    assert r.route(conv(ask), full) == "cap-multi"
    assert r.route(conv(ask), withheld) == NO_ADAPTER
    v = r.votes(conv(ask), full)  # cosine 1 for both; Jaccard 1 and 1/2, squared (tool_weight 2)
    assert v["cap-multi"] == pytest.approx(1.0, abs=1e-5) and v[NO_ADAPTER] == pytest.approx(0.25, abs=1e-5)
    blind = RetrievalRouter(index, k=2, min_similarity=0.0, tool_weight=0.0)
    assert blind.votes(conv(ask), full)["cap-multi"] == pytest.approx(blind.votes(conv(ask), full)[NO_ADAPTER])
    assert r.votes(conv(ask), None) == blind.votes(conv(ask), full)  # tools not known: messages alone


def test_balanced_vote_divides_by_each_labels_share(router):
    """Two labels' examples: one of ``cap-x`` and three of ``none``; the balanced vote of a label is its summed
    similarity over (number of labels × its share of the index)."""
    emb = router.embedder
    texts = ["Refund the blender from my delivered order", "Where is my order?", "Track my package please",
             "What is the status of my order?"]
    index = RouterIndex(emb.model_name)
    index.add(texts, ["cap-x", NO_ADAPTER, NO_ADAPTER, NO_ADAPTER], ["t"] * 4, emb.encode(texts))
    q = conv("I want my money back for the order that arrived")
    raw = RetrievalRouter(index, emb, k=4, min_similarity=0.0, balance=False).votes(q)
    bal = RetrievalRouter(index, emb, k=4, min_similarity=0.0, balance=True).votes(q)
    assert bal["cap-x"] == pytest.approx(raw["cap-x"] / (2 * 0.25))
    assert bal[NO_ADAPTER] == pytest.approx(raw[NO_ADAPTER] / (2 * 0.75))


def test_an_index_saved_before_tools_were_recorded_loads_as_unknown(router, tmp_path):
    import json

    router.index.save(tmp_path / "old")
    meta = json.loads((tmp_path / "old.json").read_text())
    del meta["tools"]
    (tmp_path / "old.json").write_text(json.dumps(meta))
    loaded = RouterIndex.load(tmp_path / "old")
    assert loaded.tools == [None] * len(loaded.texts)
    assert (loaded.tool_agreement(["a"]) == 1.0).all()
    meta["tools"] = [["a"]]
    (tmp_path / "old.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="tool lists; rebuild"):
        RouterIndex.load(tmp_path / "old")


def test_reference_corpus_plays_every_case_of_an_env_that_names_them(toolsandbox_data):
    """Five routing seeds of a five-case env give one example of each case, in the spec's order."""
    import gymnasium as gym

    from trace_gym.route.build import reference_corpus

    make = lambda: gym.make("trace/cap-ts-multiple-tool-call-v0")  # noqa: E731
    names = make().unwrapped.case_names()
    trajs = reference_corpus(make, range(len(names)))
    assert [t.reset_info["case"] for t in trajs] == names
    again = reference_corpus(make, range(len(names)))
    assert [t.transcript for t in again] == [t.transcript for t in trajs]  # same seeds, same examples


def test_leave_one_out_routes_each_episode_without_its_own_example(router):
    from types import SimpleNamespace

    from trace_gym.route.build import example_source, leave_one_out, routing_accuracy

    a = SimpleNamespace(env_id="trace/toolsandbox-v0", seed=0, options={"scenario": "a"})
    b = SimpleNamespace(env_id="trace/toolsandbox-v0", seed=0, options={"scenario": "b"})
    assert example_source(a) != example_source(b)  # one env, one seed, two tasks
    assert example_source(SimpleNamespace(env_id="e", seed=3, options=None)) == "e#3"
    index = router.index
    dropped = index.without({"test:0"})  # the first example of every label
    assert len(dropped.texts) == len(index.texts) - 3 and "test:0" not in dropped.sources
    assert dropped.vectors.shape == (len(dropped.texts), index.vectors.shape[1])
    assert len(index.without(set()).texts) == len(index.texts)
    # Asked its own text, the whole index finds the example itself (cosine 1); with that example left out, no
    # other example is as close, and the strict router falls back to no adapter.
    own = EXAMPLES["cap-refund-policy"][1]
    convs = [(conv(own), None, "cap-refund-policy", "test:1")]
    strict = {"k": 1, "min_similarity": 0.9}
    assert routing_accuracy(RetrievalRouter(index, router.embedder, **strict), [c[:3] for c in convs]).correct == 1
    rep = leave_one_out(index, convs, router.embedder, **strict)
    assert (rep.n, rep.correct, rep.confusion) == (1, 0, {"cap-refund-policy": {NO_ADAPTER: 1}})
    # a source the index does not hold leaves it whole
    assert leave_one_out(index, [(*convs[0][:3], "elsewhere")], router.embedder, **strict).correct == 1


def test_gate_keeps_what_the_base_model_passes_and_sends_the_rest_to_an_adapter(tmp_path):
    """``rule="gate"``: a conversation stays with the base model only when the nearest example offering exactly
    its tools is one the base model passed; otherwise the adapters' examples vote, and with no vote the
    fallback adapter answers. Settings stored with the index route every router loaded from it alike."""
    emb = Embedder()
    ask = "Remove the phone number +12453344098 from my contacts"
    texts = [ask, ask, "Add a reminder to buy milk tomorrow at 5 PM"]
    index = RouterIndex(emb.model_name)
    index.add(texts, [NO_ADAPTER, "cap-multi", "cap-time"], ["s0", "s1", "s2"], emb.encode(texts),
              [["search_contacts"], ["remove_contact", "search_contacts"], ["add_reminder"]])
    index.settings = {"rule": "gate", "fallback": "cap-multi"}
    gate = RetrievalRouter(index, emb)
    assert gate.rule == "gate" and gate.fallback == "cap-multi"
    withheld, full = [_fn("search_contacts")], [_fn("remove_contact"), _fn("search_contacts")]
    assert gate.kept_by_base(conv(ask), withheld) and gate.route(conv(ask), withheld) == NO_ADAPTER
    assert not gate.kept_by_base(conv(ask), full) and gate.route(conv(ask), full) == "cap-multi"
    # another request: no base success near it, the adapters' examples vote (cosine times tool overlap squared)
    assert gate.route(conv("Remind me to buy milk tomorrow at 5 PM"), [_fn("add_reminder")]) == "cap-time"
    # nothing close enough votes: the fallback adapter; the vote rule sends the same conversation to none
    far = conv("Quantum chromodynamics lattice simulations")
    assert RetrievalRouter(index, emb, min_similarity=0.9).route(far, [_fn("y")]) == "cap-multi"
    assert RetrievalRouter(index, emb, min_similarity=0.9, rule="vote").route(far, [_fn("y")]) == NO_ADAPTER
    # no user message: no adapter, whatever the rule
    assert gate.route([{"role": "system", "content": "x"}]) == NO_ADAPTER
    # the settings travel with the index (and with a leave-one-out copy of it)
    index.save(tmp_path / "idx")
    loaded = RouterIndex.load(tmp_path / "idx")
    assert loaded.settings == index.settings and index.without({"s1"}).settings == index.settings
    again = RetrievalRouter(loaded, emb)
    assert again.route(conv(ask), full) == "cap-multi" and again.route(conv(ask), withheld) == NO_ADAPTER
    # leaving out the only example of the fallback keeps it answerable
    assert "cap-multi" in RetrievalRouter(index.without({"s1"}), emb).labels
    with pytest.raises(ValueError, match="unknown routing rule"):
        RetrievalRouter(index, emb, rule="majority")


def test_cover_sends_a_conversation_to_an_adapter_only_with_its_examples_tools():
    """``rule="cover"``: the nearest adapter example decides, and only when the conversation offers every tool
    that example offered; the same request with one of them withheld stays with the base model, as does a
    request far from every adapter example. Base-model examples take no part."""
    emb = Embedder()
    ask = "Remove the phone number +12453344098 from my contacts"
    remind = "Add a reminder to buy milk tomorrow at 5 PM"
    index = RouterIndex(emb.model_name)
    index.add([ask, ask, remind], [NO_ADAPTER, "cap-multi", "cap-time"], ["s0", "s1", "s2"],
              emb.encode([ask, ask, remind]), [["search_contacts"], ["remove_contact", "search_contacts"], None])
    cover = RetrievalRouter(index, emb, rule="cover", min_similarity=0.5)
    full, withheld = [_fn("remove_contact"), _fn("search_contacts")], [_fn("search_contacts")]
    assert cover.route(conv(ask), full) == "cap-multi"
    assert cover.route(conv(ask), full + [_fn("get_current_timestamp")]) == "cap-multi"  # more tools: still covered
    assert cover.route(conv(ask), withheld) == NO_ADAPTER  # a tool the adapter's example needed is missing
    assert cover.route(conv(ask), None) == "cap-multi"  # tools not known count as offered
    assert cover.route(conv("Remind me to buy milk tomorrow at 5 PM"), [_fn("x")]) == "cap-time"  # example's tools unknown
    assert cover.route(conv("Quantum chromodynamics lattice simulations"), full) == NO_ADAPTER  # too far
    assert cover.route([{"role": "system", "content": "x"}], full) == NO_ADAPTER
    only_base = RouterIndex(emb.model_name)
    only_base.add([ask], [NO_ADAPTER], ["s0"], emb.encode([ask]), [["search_contacts"]])
    assert RetrievalRouter(only_base, emb, rule="cover").route(conv(ask), full) == NO_ADAPTER
    # the rule travels with the index's settings like the others
    index.settings = {"rule": "cover"}
    assert RetrievalRouter(index, emb, min_similarity=0.5).route(conv(ask), withheld) == NO_ADAPTER


def test_a_setting_the_rule_does_not_read_is_an_error():
    """Each rule declares the settings it reads: ``cover`` reads ``min_similarity`` only, ``vote`` has no fallback;
    settings left out take their defaults, and the index's stored fallback does not count as given."""
    from trace_gym.route.retrieval import DEFAULTS, RULE_TYPES, RULES

    emb = Embedder()
    index = RouterIndex(emb.model_name)
    index.add(["hello"], ["cap-a"], ["s0"], emb.encode(["hello"]), [None])
    assert RULES == ("vote", "gate", "cover", "needs") and set(RULE_TYPES) == set(RULES)
    for given in ({"k": 3}, {"balance": False}, {"tool_weight": 0.0}, {"fallback": "cap-a"}):
        with pytest.raises(ValueError, match="'cover' routing rule does not use"):
            RetrievalRouter(index, emb, rule="cover", **given)
    with pytest.raises(ValueError, match=r"'vote' routing rule does not use \['fallback'\]"):
        RetrievalRouter(index, emb, fallback="cap-a")
    router = RetrievalRouter(index, emb, rule="cover")
    assert (router.k, router.min_similarity, router.tool_weight, router.balance) == tuple(DEFAULTS.values())
    index.settings = {"rule": "gate", "fallback": "cap-a"}
    assert RetrievalRouter(index, emb, rule="vote").fallback == "cap-a"
    assert RetrievalRouter(index, emb, fallback="cap-a", k=2).rule == "gate"
