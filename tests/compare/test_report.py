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
