"""Property tests of the ToolSandbox scorer (Hypothesis): bounds, minefields, robustness."""

from __future__ import annotations

import copy
import json
from functools import lru_cache
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from tests.corpora import corpus_files, missing
from trace_gym.toolsandbox.evaluation import EvaluationInputError, evaluate, first_user_index
from trace_gym.toolsandbox.scenarios import ColumnSimilarity, load_scenarios, thaw
from trace_gym.toolsandbox.similarity import rouge_l, table_similarity

RECORD_IDS = [
    "wifi_off/oracle",
    "wifi_off/paraphrase",
    "send_message_with_contact_content_cellular_off/oracle",
    "add_contact_with_name_and_phone_number/extra_write_early",
    "update_contact_relationship_with_relationship_twice_multiple_user_turn/extra_write",
    "find_current_city_low_battery_mode_alt/oracle",
]


@lru_cache(maxsize=1)
def _corpus() -> dict[str, dict[str, Any]]:
    out = {}
    for path in corpus_files("toolsandbox"):
        for line in path.read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            if rec["id"] in RECORD_IDS or (rec["kind"] == "oracle" and load_scenarios()[rec["scenario"]].minefields):
                out[rec["id"]] = rec
    return out


def _need_corpus() -> dict[str, dict[str, Any]]:
    corpus = _corpus()
    if not corpus:
        pytest.skip(missing("toolsandbox"))
    return corpus


def _check_bounds(scenario, messages, result) -> None:
    assert 0.0 <= result.similarity <= 1.0
    assert 0.0 <= result.milestone_similarity <= 1.0
    assert 0.0 <= result.minefield_similarity <= 1.0
    assert result.similarity == (result.milestone_similarity if result.minefield_similarity == 0 else 0.0)
    first, last = first_user_index(messages), len(messages) - 1
    for mapping, edges in (
        (result.milestone_mapping, scenario.milestone_edges),
        (result.minefield_mapping, scenario.minefield_edges),
    ):
        for index, sim in mapping.values():
            assert first <= index <= last and 0.0 <= sim <= 1.0
        for a, b in edges:
            assert mapping[a][0] <= mapping[b][0]


text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=60)


@given(record_id=st.sampled_from(RECORD_IDS), replies=st.lists(text, min_size=1, max_size=4))
def test_random_replies_keep_scores_in_bounds(record_id: str, replies: list[str]) -> None:
    rec = _need_corpus()[record_id]
    scenario = load_scenarios()[rec["scenario"]]
    messages = copy.deepcopy(rec["messages"])
    agent_replies = [
        m for m in messages[first_user_index(messages) :] if m["sender"] == "AGENT" and m["recipient"] == "USER"
    ]
    for k, m in enumerate(agent_replies):
        m["content"] = replies[k % len(replies)]
    result = evaluate(scenario, messages, rec["db_snapshots"])
    _check_bounds(scenario, messages, result)
    if all(r == "" for r in replies) and agent_replies and scenario.milestones:
        assert result.similarity < 1.0  # the replies are milestones of these scenarios


def _minefield_oracles() -> list[str]:
    return sorted(k for k in _corpus() if k.endswith("/oracle") and k not in RECORD_IDS) or ["<none>"]


@given(data=st.data(), prefix=text, suffix=text)
def test_touching_a_minefield_zeroes_the_episode(data: st.DataObject, prefix: str, suffix: str) -> None:
    corpus = _need_corpus()
    record_id = data.draw(st.sampled_from(_minefield_oracles()))
    rec = corpus[record_id]
    scenario = load_scenarios()[rec["scenario"]]
    (mine,) = scenario.minefields
    (cons,) = [c for c in mine.constraints if c.database == "SANDBOX"]
    target = dict(cons.target_rows[0])
    messages = copy.deepcopy(rec["messages"])
    baseline = evaluate(scenario, messages, rec["db_snapshots"])
    assert baseline.minefield_similarity == 0.0 and baseline.similarity == 1.0
    row = dict(messages[-1])
    row.update(
        sandbox_message_index=len(messages),
        sender=target["sender"],
        recipient=target["recipient"],
        content=prefix + suffix,
        visible_to=[target["sender"], target["recipient"]],
        tool_trace=None,
    )
    if "content" in target:  # the forbidden tool named in the agent's call
        assert cons.column_similarity["content"].kind == "contains"
        row["content"] = prefix + target["content"] + suffix
    else:  # the forbidden tool traced in the execution environment's answer
        assert cons.column_similarity["tool_trace"].kind == "tool_trace"
        golden = thaw(target["tool_trace"])[0]
        arguments = {**golden["arguments"], "note": prefix}
        row["tool_trace"] = [{"tool_name": golden["tool_name"], "arguments": arguments, "result": suffix}]
    messages.append(row)
    result = evaluate(scenario, messages, rec["db_snapshots"])
    assert result.minefield_similarity > 0.0
    assert result.similarity == 0.0
    _check_bounds(scenario, messages, result)


junk = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 50), st.floats(allow_nan=True), text, st.lists(text, max_size=2)
)


@given(
    record_id=st.sampled_from(RECORD_IDS),
    position=st.integers(0, 10_000),
    column=st.sampled_from(
        ["sandbox_message_index", "sender", "recipient", "content", "conversation_active", "tool_trace", "visible_to"]
    ),
    value=junk,
)
def test_fuzzed_rows_give_a_score_or_a_clear_error(record_id: str, position: int, column: str, value: Any) -> None:
    rec = _need_corpus()[record_id]
    scenario = load_scenarios()[rec["scenario"]]
    messages = copy.deepcopy(rec["messages"])
    messages[position % len(messages)][column] = value
    before = copy.deepcopy(messages)
    try:
        result = evaluate(scenario, messages, rec["db_snapshots"])
    except EvaluationInputError as exc:
        assert str(exc).startswith("messages")
    else:
        _check_bounds(scenario, messages, result)
    assert messages == before


@given(
    record_id=st.sampled_from(RECORD_IDS),
    data=st.data(),
    value=junk,
)
def test_fuzzed_world_rows_give_a_score_or_a_clear_error(record_id: str, data: st.DataObject, value: Any) -> None:
    rec = _need_corpus()[record_id]
    scenario = load_scenarios()[rec["scenario"]]
    dbs = copy.deepcopy(rec["db_snapshots"])
    db = data.draw(st.sampled_from(sorted(dbs)))
    snaps = [s for s in dbs[db] if s["rows"]]
    assume(snaps)  # a database with rows to corrupt (Hypothesis fails the test if too few draws have one)
    snap = data.draw(st.sampled_from(snaps))
    row = data.draw(st.sampled_from(snap["rows"]))
    row[data.draw(st.sampled_from(sorted(row)))] = value
    before = copy.deepcopy(dbs)
    try:
        result = evaluate(scenario, rec["messages"], dbs)
    except EvaluationInputError as exc:
        assert str(exc).startswith(f"db_snapshots.{db}")
    else:
        _check_bounds(scenario, rec["messages"], result)
    assert dbs == before


row_values = st.one_of(st.none(), text, st.sampled_from(["friend", "best friend", "Ann", "Bob"]))


@given(
    rows=st.lists(st.fixed_dictionaries({"a": row_values, "b": row_values}), min_size=0, max_size=4),
    targets=st.lists(st.fixed_dictionaries({"a": row_values, "b": row_values}), min_size=1, max_size=4),
)
def test_table_similarity_is_in_unit_interval(rows: list[dict], targets: list[dict]) -> None:
    specs = {"a": ColumnSimilarity("exact"), "b": ColumnSimilarity("rouge_l")}
    score = table_similarity(rows, {"a", "b"}, targets, specs)
    assert 0.0 <= score <= 1.0
    if len(rows) != len(targets):
        assert score == 0.0


@given(a=text, b=text)
def test_rouge_l_is_symmetric_and_bounded(a: str, b: str) -> None:
    assert 0.0 <= rouge_l(a, b) <= 1.0
    assert rouge_l(a, b) == rouge_l(b, a)
    if any(ch.isascii() and ch.isalnum() for ch in a):
        assert rouge_l(a, a) == 1.0
