"""The need gate (trace_gym.route.needs): its examples, scores, decision, calibration and storage.

Embeddings are hand-made unit vectors here, so every score can be worked out by hand; the gate on real
requests and the real embedding model is tested in tests/pipeline/test_needs_gate.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trace_gym.route.needs import GATE_DEFAULTS, NeedExample, NeedGate, calibrate, withheld_pairs

CLOCK, REMIND, CONTACTS, SEND = "get_current_timestamp", "search_reminder", "search_contacts", "send_message"


def unit(*xs: float) -> np.ndarray:
    v = np.array(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


# request directions: "what's my upcoming reminder" (r), "text Bob" (s); nearly orthogonal
R, S = unit(1, 0, 0), unit(0, 1, 0)


def gate(examples: list[NeedExample], vectors: list[np.ndarray], **settings) -> NeedGate:
    return NeedGate(examples, "hand-made", np.stack(vectors), settings)


def test_an_example_keeps_only_the_withheld_tools_it_does_not_offer():
    e = NeedExample.make("x", [SEND, CONTACTS, SEND], None, True, "t", missing=[CONTACTS, CLOCK])
    assert e.tools == (CONTACTS, SEND) and e.missing == (CLOCK,)
    assert NeedExample.make("x", [SEND], [SEND], False, "t", missing=[CLOCK]).missing is None  # an acting one has none


@given(st.lists(st.sampled_from([CLOCK, REMIND, CONTACTS, SEND]), max_size=4),
       st.lists(st.sampled_from([CLOCK, REMIND, CONTACTS, SEND]), max_size=4))
def test_withheld_pairs_drop_one_needed_offered_tool_each(tools, needs):
    e = NeedExample.make("req", tools, needs, False, "src")
    pairs = withheld_pairs([e, NeedExample.make("no", tools, None, True, "r")])
    assert len(pairs) == len(set(needs) & set(tools))
    for p in pairs:
        (t,) = p.missing
        assert p.refuse and t not in p.tools and set(p.tools) | {t} == set(e.tools) and p.source == "src"


def test_the_need_score_is_the_share_of_like_requests_that_need_a_tool_not_offered():
    acting = [NeedExample.make("upcoming", [CLOCK, REMIND], [CLOCK, REMIND], False, f"a{i}") for i in range(3)]
    g = gate(acting, [R, R, R], k=3)
    sc = g.score(R, [REMIND])                   # the clock withheld from a request like theirs
    assert (sc.need, sc.tool) == (1.0, CLOCK)
    assert g.missing(R, [REMIND]) and not g.missing(R, [CLOCK, REMIND])
    assert g.score(R, [CLOCK, REMIND]).need == 0.0
    # a request unlike them (orthogonal) weighs nothing: no evidence, no refusal
    assert g.score(S, [REMIND]).need == 0.0 and not g.missing(S, [REMIND])
    # leaving their sources out leaves nothing to judge by
    assert all(g.score(R, [REMIND], skip=f"a{i}").need == 1.0 for i in range(3))


def test_a_refusal_example_matches_a_query_lacking_what_it_lacked():
    known = NeedExample.make("city", ["search_lat_lon"], None, True, "r1", missing=["get_current_location"])
    unknown = NeedExample.make("remove", [CONTACTS], None, True, "r2")
    g = gate([known, unknown], [R, S], refusal_threshold=0.9, need_threshold=1.01)
    assert g.score(R, ["search_lat_lon", "set_wifi"]).refusal == pytest.approx(1.0)  # lacks the location too
    assert g.score(R, ["search_lat_lon", "get_current_location"]).refusal == 0.0  # has it: not like that refusal
    # without its withheld tools known, a query offering no more than it did matches
    assert g.score(S, [CONTACTS]).refusal == pytest.approx(1.0) and g.score(S, [CONTACTS, SEND]).refusal == 0.0


def test_with_same_tools_the_nearest_example_offering_exactly_those_tools_answers():
    yes = NeedExample.make("a", [REMIND], [REMIND], False, "act")
    no = NeedExample.make("b", [REMIND], None, True, "ref")
    g = gate([yes, no], [unit(1, 0.1, 0), unit(1, 0, 0.3)], same_tools=True, need_threshold=1.01, refusal_threshold=1.01)
    assert g.score(unit(1, 0.1, 0), [REMIND]).same is False and not g.missing(unit(1, 0.1, 0), [REMIND])
    assert g.score(unit(1, 0, 0.3), [REMIND]).same is True and g.missing(unit(1, 0, 0.3), [REMIND])
    assert g.score(R, [REMIND, CLOCK]).same is None  # no example offered exactly these


def test_calibration_keeps_refusals_first_and_reads_only_the_learning_tasks():
    # target tasks: two that act needing the clock, two refusals of the same request with the clock withheld
    ex = [NeedExample.make("up", [CLOCK, REMIND], [CLOCK, REMIND], False, "t1"),
          NeedExample.make("up", [CLOCK, REMIND], [CLOCK, REMIND], False, "t2"),
          NeedExample.make("up", [REMIND], None, True, "t3", missing=[CLOCK]),
          NeedExample.make("up", [REMIND], None, True, "t4", missing=[CLOCK]),
          # a capability env's example that would mislead the target examples
          NeedExample.make("up", [REMIND], [REMIND], False, "c1", origin="capability")]
    g = gate(ex, [R] * 5)
    tuned, cal = calibrate(g)
    assert cal.n == 4 and cal.correct == 4 and (cal.missed_refusals, cal.false_refusals) == (0, 0)
    assert tuned.missing(R, [REMIND]) and not tuned.missing(R, [CLOCK, REMIND])
    assert cal.origins == ("target", "withheld") and all(e.origin in cal.origins for e in tuned.examples)
    assert set(tuned.settings) <= set(GATE_DEFAULTS)
    with pytest.raises(ValueError, match="refuse and ones that act"):
        calibrate(gate(ex[:2], [R, R]))
    with pytest.raises(ValueError, match="refusal_cost"):
        calibrate(g, refusal_cost=0)


def test_bad_settings_and_shapes_are_errors():
    e = [NeedExample.make("a", [REMIND], [REMIND], False, "x")]
    with pytest.raises(ValueError, match="unknown need-gate setting"):
        gate(e, [R], threshold=0.5)
    with pytest.raises(ValueError, match="out of range"):
        gate(e, [R], k=0)
    with pytest.raises(ValueError, match="1 examples but 2 vectors"):
        NeedGate(e, "m", np.stack([R, S]))
    with pytest.raises(ValueError, match="at least one example"):
        NeedGate([], "m", np.zeros((0, 3)))


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([R, S]), st.lists(st.sampled_from([CLOCK, REMIND, CONTACTS, SEND]), max_size=3),
                          st.booleans()), min_size=1, max_size=6))
def test_offering_every_known_tool_leaves_nothing_missing_by_need(rows):
    ex = [NeedExample.make(f"q{i}", tools, None if refuse else tools, refuse, f"s{i}") for i, (_, tools, refuse) in enumerate(rows)]
    g = gate(ex, [v for v, _, _ in rows])
    every = g.catalog
    for q in (R, S):
        sc = g.score(q, every)
        assert sc.need == 0.0 and sc.tool is None
        assert g.score(q, every) == sc  # deterministic


def test_saved_and_loaded_gate_scores_alike(tmp_path):
    ex = [NeedExample.make("up", [CLOCK, REMIND], [CLOCK, REMIND], False, "t1"),
          NeedExample.make("up", [REMIND], None, True, "t2", missing=[CLOCK], origin="withheld")]
    g = gate(ex, [R, R], need_threshold=0.6)
    g.save(tmp_path / "gate")
    back = NeedGate.load(tmp_path / "gate")
    assert back.examples == g.examples and back.settings == g.settings and back.model == "hand-made"
    assert back.score(R, [REMIND]) == g.score(R, [REMIND])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gate.json", "gate.npy"]
