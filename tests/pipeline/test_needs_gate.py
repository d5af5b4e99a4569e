"""The needs rule's gate on real ToolSandbox scenarios and a real capability env, the real embedding model,
and the per-capability-or-joint selection on real episodes (trace_gym.pipeline.gate, .selection)."""

from __future__ import annotations

import pytest

from tests.extras import need

need("sentence_transformers")

from trace_gym.pipeline.gate import build_gate, held_out_gate, opening_examples  # noqa: E402
from trace_gym.pipeline.selection import JOINT_CHOICE, PER_CAPABILITY, select_adapters  # noqa: E402
from trace_gym.pipeline.stages import capability_factory  # noqa: E402
from trace_gym.pipeline.target import Target  # noqa: E402
from trace_gym.route.base import NO_ADAPTER  # noqa: E402
from trace_gym.route.embed import Embedder  # noqa: E402
from trace_gym.route.index import RouterIndex  # noqa: E402
from trace_gym.route.retrieval import RetrievalRouter  # noqa: E402

TS = "trace/toolsandbox-v0"
# learning tasks (fold_a): the low-battery city question answerable and withheld, reminders answerable and withheld
LEARN = ["find_current_city_low_battery_mode_insufficient_information", "search_reminder_with_recency_yesterday",
         "search_reminder_with_creation_recency_yesterday", "search_reminder_with_creation_recency_yesterday_insufficient_information",
         "find_days_till_holiday_wifi_off", "find_days_till_holiday_insufficient_information", "wifi_off",
         "remove_contact_by_phone_alt", "remove_contact_by_phone_no_search_contacts_insufficient_information"]


@pytest.fixture(scope="module")
def built(toolsandbox_data):
    from trace_gym.capabilities.entries import spec_files

    spec = next(p for p in spec_files() if p.stem == "cap-ts-state-dependency")
    target = Target(TS)
    emb = Embedder()
    return target, emb, build_gate(target.make, LEARN, {"cap-sd": capability_factory(spec, {}, None, "routing")},
                                   seed=0, per_env=8, embedder=emb)


def test_openings_carry_the_gold_of_each_task(toolsandbox_data):
    ex = {e.source: e for e in opening_examples(Target(TS).make, LEARN[:2], seed=0, origin="target")}
    city = ex["find_current_city_low_battery_mode_insufficient_information"]
    assert city.refuse and city.needs is None and "get_current_location" in city.missing
    assert city.text == "What city am I in?" and "get_current_location" not in city.tools
    rem = ex["search_reminder_with_recency_yesterday"]
    assert not rem.refuse and "get_current_timestamp" in rem.needs and set(rem.needs) <= set(rem.tools)


def test_the_gate_is_calibrated_on_the_learning_tasks_and_judges_held_out_twins(built, tmp_path):
    target, emb, b = built
    assert b.counts["target"] == len(LEARN) and b.counts["target_refusals"] == 4 and b.counts["capability"] == 8
    assert b.calibration.n == len(LEARN) and b.calibration.correct <= len(LEARN)
    assert b.adapter_examples["cap-sd"] and not any(e.refuse for e in b.adapter_examples["cap-sd"])
    # a held-out twin (fold_b): the same question, the location tool withheld, fewer settings tools
    twin = opening_examples(target.make, ["find_current_city_insufficient_information"], seed=0, origin="held-out")[0]
    q = emb.encode([twin.text])[0]
    assert b.gate.score(q, twin.tools).refusal == pytest.approx(1.0, abs=1e-4)
    # routed through an index with the gate: the needs rule keeps it for the base model
    index = RouterIndex(emb.model_name)
    texts = [e.text for e in b.adapter_examples["cap-sd"]]
    index.add(texts, ["cap-sd"] * len(texts), [e.source for e in b.adapter_examples["cap-sd"]], emb.encode(texts),
              [list(e.tools) for e in b.adapter_examples["cap-sd"]])
    index.gate = b.gate
    index.settings = {"rule": "needs", "adapters": PER_CAPABILITY, "fallback": "cap-sd"}
    index.save(tmp_path / "router_index")
    router = RetrievalRouter(RouterIndex.load(tmp_path / "router_index"), emb)
    assert router.rule == "needs" and router.index.gate is not None
    # the rule follows the gate: the base model where a needed tool is missing, else the nearest adapter
    tools = [{"name": n} for n in twin.tools]
    held = router.route([{"role": "user", "content": twin.text}], tools)
    assert held == (NO_ADAPTER if b.gate.missing(q, twin.tools) else "cap-sd")
    full = [{"name": n} for n in ("search_contacts", "set_cellular_service_status", "send_message_with_phone_number")]
    text = "Send a message to Homer S saying: see you soon"
    kept = b.gate.missing(emb.encode([text])[0], [t["name"] for t in full])
    assert router.route([{"role": "user", "content": text}], full) == (NO_ADAPTER if kept else "cap-sd")
    assert router.route([{"role": "assistant", "content": "hi"}], full) == NO_ADAPTER  # no request: the base model
    # the diagnostic over held-out tasks adds up
    diag = held_out_gate(str(tmp_path / "router_index"), target.make,
                         ["find_current_city_insufficient_information", "get_wifi"], seed=1000)
    assert diag["n"] == 2 and diag["refusals"] == 1 and diag["answerable"] == 1
    assert diag["correct"] == diag["caught"] + diag["answerable"] - diag["false_refusals"]


class _Says:
    """A policy that always answers with one message (a refusal, say)."""

    def __init__(self, text: str):
        self.text, self.policy_id = text, f"says:{text[:10]}"

    def act(self, messages, tools):
        return self.text


class _Switches:
    """A policy that turns wifi off or reads it, as the offered tools allow, then says it is done."""

    policy_id = "switches"

    def act(self, messages, tools):
        names = {t.get("function", t)["name"] for t in tools}
        if any(m["role"] == "tool" for m in messages):
            return "Done: your wifi is taken care of. ###STOP###"
        if "set_wifi_status" in names:
            return '<tool_call>{"name": "set_wifi_status", "arguments": {"on": false}}</tool_call>'
        return '<tool_call>{"name": "get_wifi_status", "arguments": {}}</tool_call>'


def test_selection_keeps_whichever_candidate_scores_higher_on_learning_tasks(toolsandbox_data, tmp_path):
    target = Target(TS)
    tasks = ["wifi_off", "get_wifi", "find_days_till_holiday_insufficient_information"]
    refuse = _Says("Sorry, I can't do that: I don't have the tool it needs. ###STOP###")
    act = _Switches()
    routes = {tasks[0]: "cap-a", tasks[1]: "cap-a", tasks[2]: NO_ADAPTER}  # the gate keeps the third for the base model

    def run(policies, store):
        return select_adapters(target, tasks, routes.__getitem__, "joint", policies.__getitem__, tmp_path / store, n=5, seed=7)

    sel = run({"cap-a": act, "joint": refuse}, "a.jsonl")
    assert sel.n == 2 and [r["task"] for r in sel.rows] == tasks[:2] and sel.choice == PER_CAPABILITY
    assert sel.mean[PER_CAPABILITY] > sel.mean[JOINT_CHOICE] and sel.rollouts == 4
    assert run({"cap-a": refuse, "joint": act}, "b.jsonl").choice == JOINT_CHOICE
    assert run({"cap-a": act, "joint": act}, "c.jsonl").choice == PER_CAPABILITY  # a tie keeps per-capability adapters
    none = select_adapters(target, tasks, lambda t: NO_ADAPTER, "joint", {}.__getitem__, tmp_path / "d.jsonl", n=5, seed=7)
    assert none.choice == PER_CAPABILITY and none.n == 0
    assert select_adapters(target, tasks, routes.__getitem__, "joint", {}.__getitem__, tmp_path / "e.jsonl", n=0,
                           seed=7).n == 0
