"""The comparison report's routing section."""

from trace_gym.compare.report import routing_markdown


def test_the_routing_section_shows_held_out_and_left_out_train_routing():
    held = {"n": 3, "correct": 2, "confusion": {"none": {"none": 2}, "cap-a": {"none": 1}}}
    doc = {"details": {"trace": {"held_out_routing": held, "routing": {"n": 24, "correct": 24, "loo_correct": 16}}}}
    md = routing_markdown(doc)
    assert "2/3 agree" in md and "16/24 agree (with the index whole: 24/24)" in md
    assert "| cap-a | 0 | 1 |" in md  # columns: cap-a, none
    del doc["details"]["trace"]["routing"]["loo_correct"]  # a run from before leave-one-out: the held-out part alone
    assert "left out" not in routing_markdown(doc) and "2/3 agree" in routing_markdown(doc)
    assert routing_markdown({"details": {}}) == ""
    doc["details"]["trace"]["routing"]["rule"] = "gate"
    assert "routing (rule `gate`) of the 3 held-out tasks" in routing_markdown(doc)


def test_the_ledger_says_what_the_adapters_rehearsed_without_charging_it():
    from trace_gym.compare.report import ledger_markdown

    adapters = [{"demonstrations": 24, "rehearsed": 18}, {"demonstrations": 24, "rehearsed": 18}]
    doc = {"methods": {"trace": {"rollouts": 120, "budget": 168}},
           "details": {"trace": {"budget": {"by_stage": {"train:a": 60, "train:b": 60}}, "adapters": adapters}}}
    md = ledger_markdown(doc)
    assert "| TRACE" in md and "| 120 | 168 |" in md
    assert "48 of them reference episodes" in md and "rehearsed 36 episodes (not charged again): 36 of the shared warm start" in md
    # with the base model's successes and the other adapters' demonstrations among them, each kind is counted
    for a in adapters:
        a.update(rehearsed=18 + 5 + 24, rehearsed_base=5, rehearsed_peers=24)
    md = ledger_markdown(doc)
    assert ("rehearsed 94 episodes (not charged again): 10 of them the base model's own successful train episodes, "
            "48 the other adapters' demonstrations (charged in their stages), 36 of the shared warm start") in md
