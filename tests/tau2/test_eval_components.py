"""Evaluator components: action/communicate matching, NL judging, strict mode, premature ends, pass^k."""

from __future__ import annotations

import json

import pytest

from trace_gym.eval.metrics import pass_hat_k
from trace_gym.llm import FunctionChatClient
from trace_gym.tau2.evaluator import action_checks, communicate_checks, is_success
from trace_gym.tau2.judge import FunctionJudge, JudgeError, OpenAICompatibleJudge


def _call(name, args, role="assistant"):
    return {"role": role, "content": None, "tool_calls": [{"id": "c", "name": name, "arguments": args, "requestor": role}]}


def test_action_match_uses_only_the_calls_keys_when_compare_args_is_null():
    gold = [{"action_id": "a", "name": "f", "arguments": {"x": 1, "y": 2}}]
    assert action_checks([_call("f", {"x": 1})], gold)[0]["action_match"] is True  # subset matches (tau2 quirk)
    assert action_checks([_call("f", {"x": 2})], gold)[0]["action_match"] is False
    assert action_checks([_call("g", {"x": 1})], gold)[0]["action_match"] is False
    # compare_args restricts the comparison; [] matches on the name alone; user calls count too
    gold2 = [{"action_id": "b", "name": "f", "arguments": {"x": 1, "y": 2}, "compare_args": ["y"]}]
    assert action_checks([_call("f", {"x": 9, "y": 2}, role="user")], gold2)[0]["action_match"] is True
    gold3 = [{"action_id": "c", "name": "f", "arguments": {"x": 1}, "compare_args": []}]
    out = action_checks([_call("f", {"x": 5})], gold3, {"f": "generic"}.get)
    assert out[0]["action_match"] is True and out[0]["tool_type"] == "generic"
    assert out[0]["action"] == {"action_id": "c", "requestor": "assistant", "name": "f", "arguments": {"x": 1},
                                "info": None, "compare_args": []}


def test_communicate_is_case_insensitive_and_ignores_commas_in_the_message_only():
    msgs = [{"role": "assistant", "content": "Your refund is $1,286.00 IN TOTAL", "tool_calls": None},
            {"role": "user", "content": "it is 999", "tool_calls": None}]
    out = communicate_checks(msgs, ["1286", "in total", "999", "1,286"])
    assert [c["met"] for c in out] == [True, True, False, False]
    assert out[0]["justification"] == "Information '1286' communicated in the message:\n 'Your refund is $1,286.00 IN TOTAL'"
    assert out[2]["justification"] == "Information '999' not communicated."


def test_pass_hat_k():
    assert pass_hat_k({"a": [1, 1, 0, 1], "b": [0, 0, 0, 0]}, 1) == pytest.approx((3 / 4 + 0) / 2)
    assert pass_hat_k([[True, True, False, True]], 2) == pytest.approx(3 / 6)
    assert pass_hat_k([[1.0, 1.0]], 2) == 1.0
    assert is_success(0.9999999) and not is_success(0.5) and not is_success(None)
    with pytest.raises(ValueError, match="at least 3"):
        pass_hat_k([[1, 1]], 3)
    with pytest.raises(ValueError):
        pass_hat_k([], 1)
    with pytest.raises(ValueError):
        pass_hat_k([[1]], 0)


def test_function_judge_and_openai_judge_parsing():
    msgs = [{"role": "assistant", "content": "I cannot cancel that.", "tool_calls": None}]
    fj = FunctionJudge(lambda m, a: ("refuse" in a, "rule"))
    assert [c["met"] for c in fj.judge(msgs, ["Agent should refuse", "Agent cancels"])] == [True, False]

    seen = {}

    def transport(messages):
        seen["messages"] = messages
        body = {"results": [{"expectedOutcome": "A", "reasoning": "ok", "metExpectation": True},
                            {"expectedOutcome": "B", "reasoning": "no", "metExpectation": "false"}]}
        return {"role": "assistant", "content": "```json\n" + json.dumps(body) + "\n```"}

    judge = OpenAICompatibleJudge("m", client=FunctionChatClient(transport))
    out = judge.judge(msgs, ["A", "B", "C"])
    assert [c["met"] for c in out] == [True, False, False]
    assert out[2]["justification"].startswith("the judge gave no verdict")
    assert "assistant: I cannot cancel that." in seen["messages"][1]["content"]
    bad = OpenAICompatibleJudge("m", client=FunctionChatClient(lambda m: {"content": "not json"}))
    with pytest.raises(JudgeError):
        bad.judge(msgs, ["A"])


def test_unreachable_endpoint_is_a_judge_error():
    judge = OpenAICompatibleJudge("m", base_url="http://127.0.0.1:9", api_key="", timeout=2)
    with pytest.raises(JudgeError, match="cannot reach"):
        judge.judge([], ["A"])


# ---------------------------------------------------------------- with data


def _retail_nl_task():
    from trace_gym.tau2.data import load_tasks

    tasks = load_tasks("retail")
    return next(t for t in tasks if t["evaluation_criteria"].get("nl_assertions")
                and "NL_ASSERTION" in t["evaluation_criteria"]["reward_basis"])


def test_nl_assertions_are_never_silently_passed():
    from tests.tau2.test_eval_gold import gold_trajectory
    from trace_gym.tau2.evaluator import evaluate

    task = _retail_nl_task()
    traj = gold_trajectory("retail", task)
    ev = evaluate(task, traj, "user_stop", "retail")
    assert ev.reward is None and ev.nl_assertions_judged is False and ev.gym_reward() == 0.0
    ok = evaluate(task, traj, "user_stop", "retail", judge=FunctionJudge(lambda m, a: True))
    assert ok.reward == 1.0 and ok.nl_assertions_judged is True
    assert ok.reward_info["reward_breakdown"] == {"DB": 1.0, "NL_ASSERTION": 1.0}
    assert all(c["met"] for c in ok.reward_info["nl_assertions"])
    no = evaluate(task, traj, "user_stop", "retail", judge=FunctionJudge(lambda m, a: False))
    assert no.reward == 0.0 and no.reward_info["reward_breakdown"]["NL_ASSERTION"] == 0.0
    failing = OpenAICompatibleJudge("m", client=FunctionChatClient(lambda m: {"content": "garbage"}))
    err = evaluate(task, traj, "user_stop", "retail", judge=failing)
    assert err.reward is None and err.nl_assertions_judged is False and "not JSON" in err.nl_note


def test_premature_termination_scores_zero_without_checks():
    from tests.tau2.test_eval_gold import gold_trajectory
    from trace_gym.tau2.evaluator import evaluate

    task = _retail_nl_task()
    ev = evaluate(task, gold_trajectory("retail", task)[:-1], "max_steps", "retail")
    assert ev.reward == 0.0 and ev.reward_info["reward_basis"] is None
    assert ev.reward_info["info"] == {"note": "Simulation terminated prematurely. Termination reason: max_steps"}


def test_strict_mode_fails_refusals_on_every_airline_task_but_passes_judged_gold():
    from tests.tau2.test_eval_gold import gold_trajectory
    from trace_gym.tau2.data import load_tasks
    from trace_gym.tau2.evaluator import evaluate

    tasks = load_tasks("airline")
    refusal = [
        {"role": "assistant", "content": "Hi! How can I help you today?", "tool_calls": None},
        {"role": "user", "content": "Hi, I need some help with my account.", "tool_calls": None},
        {"role": "assistant", "content": "I'm sorry, but I can't help with that request.", "tool_calls": None},
        {"role": "user", "content": "###STOP###", "tool_calls": None},
    ]
    lenient = strict = 0
    for task in tasks:
        ev = evaluate(task, refusal, "user_stop", "airline", strict=True)
        lenient += ev.reward == 1.0
        strict += ev.strict_reward == 1.0
        assert ev.reward_info["strict"]["reward"] == ev.strict_reward
    assert lenient == 23 and strict == 0  # tau2 passes 23 refusals; strict mode none
    yes = FunctionJudge(lambda m, a: True)
    for task in tasks[:5]:
        ev = evaluate(task, gold_trajectory("airline", task), "user_stop", "airline", strict=True, judge=yes)
        assert ev.reward == 1.0 and ev.strict_reward == 1.0


def test_env_assertion_that_raises_is_an_evaluation_error():
    from trace_gym.tau2.data import load_tasks
    from trace_gym.tau2.evaluator import evaluate

    task = next(t for t in load_tasks("mock") if t["id"] == "create_task_1_with_env_assertions")
    msgs = [{"role": "assistant", "content": "Hi! How can I help you today?", "tool_calls": None},
            {"role": "user", "content": "###STOP###", "tool_calls": None}]
    ev = evaluate(task, msgs, "user_stop", "mock")
    assert ev.reward is None and ev.reward_info is None
    assert ev.evaluation_error == {"type": "ValueError", "message": "Task task_2 not found"}
    assert ev.gym_reward() == 0.0


def test_replay_mismatch_and_broken_trajectories_are_reported_not_raised():
    from trace_gym.tau2.data import load_tasks
    from trace_gym.tau2.evaluator import evaluate

    task = next(t for t in load_tasks("mock") if t["id"] == "create_task_1")
    call = {"id": "call_0", "name": "create_task", "arguments": {"user_id": "user_1", "title": "Important Meeting"},
            "requestor": "assistant"}
    forged = [{"role": "assistant", "content": None, "tool_calls": [call]},
              {"role": "tool", "id": "call_0", "content": "something else", "requestor": "assistant", "error": False},
              {"role": "user", "content": "###STOP###", "tool_calls": None}]
    ev = evaluate(task, forged, "user_stop", "mock")
    assert ev.evaluation_error["type"] == "ValueError" and ev.reward is None
    orphan = [{"role": "tool", "id": "x", "content": "", "requestor": "assistant", "error": False}]
    ev = evaluate(task, orphan, "user_stop", "mock")
    assert "Tool message not expected" in ev.evaluation_error["message"]
