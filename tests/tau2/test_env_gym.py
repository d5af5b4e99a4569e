"""The τ²-bench gym environments: orchestration, step counting, termination, rewards, no leaks."""

from __future__ import annotations

import json

import pytest

import trace_gym  # noqa: F401
from tests.corpora import corpus_dir
from trace_gym.tau2.users import ReplayUser


def _corpus_records(domain, variant=None):
    path = corpus_dir("tau2") / f"eval_{domain}.jsonl"
    recs = [json.loads(x) for x in path.read_text().splitlines()]
    return [r for r in recs if variant is None or r["variant"] == variant]


def _make(domain, **kw):
    from trace_gym.tau2.env import Tau2Env

    env = Tau2Env(domain, **kw)
    env.data  # noqa: B018 - load the domain now, outside the code under test
    return env


def drive(env, record):
    """Play a recorded trajectory: its assistant turns as actions, its user turns through ReplayUser."""
    skip = record["initial_history_len"]
    env._user_spec = ReplayUser(record["messages"], skip=skip)
    obs, info = env.reset(seed=0, options={"task_id": record["task_id"]})
    msgs = record["messages"][skip:]
    if not skip and not record["solo_mode"]:
        msgs = msgs[1:]  # the greeting is the environment's
    out = None
    for m in msgs:
        if m["role"] != "assistant":
            continue
        if m.get("tool_calls"):
            action = json.dumps([{"name": c["name"], "arguments": c["arguments"]} for c in m["tool_calls"]])
        else:
            action = m["content"]
        out = env.step(action)
        if out[2] or out[3]:
            break
    return out


@pytest.mark.parametrize("domain", ["mock", "airline", "retail"])
def test_recorded_trajectories_score_the_same_through_the_gym(domain):
    from trace_gym.tau2.evaluator import evaluate

    env = _make(domain, unjudged_nl="ignore")
    n = 0
    for rec in _corpus_records(domain):
        if rec["variant"] not in ("gold", "drop_write", "arg_changed", "extra_write", "communicate_omitted",
                                  "refusal_only", "read_only_extra") or rec["expected"]["evaluation_error"]:
            continue
        if any(m["role"] == "user" and m.get("tool_calls") for m in rec["messages"]) or rec["initial_history_len"]:
            continue  # user device calls / a history continued without a user turn differ in a live run
        obs, reward, term, trunc, info = drive(env, rec)
        assert term and not trunc and info["termination_reason"] == "user_stop"
        want = rec["expected"]
        expected = want["reward"] if want["reward"] is not None else want["reward_without_nl"]
        assert reward == expected, (rec["task_id"], rec["variant"], info["reward_info"])
        # the live-state evaluation equals a replay of the recorded trajectory
        replayed = evaluate(env.task, env.tau2_trajectory(), "user_stop", domain)
        assert replayed.reward_without_nl == info["reward_info"]["reward_without_nl"]
        assert replayed.reward_info["db_check"] == info["reward_info"]["db_check"]
        n += 1
    assert n > 20


def test_telecom_gold_with_user_device_calls_through_the_gym():
    env = _make("telecom")
    recs = _corpus_records("telecom", "gold")[:25]
    for rec in recs:
        obs, reward, term, trunc, info = drive(env, rec)
        assert term and info["termination_reason"] == "user_stop"
        assert reward == 1.0, (rec["task_id"], info["reward_info"])
        traj = env.tau2_trajectory()
        # scoring the live state is the same as tau2's replay of the trajectory on a fresh environment
        from trace_gym.tau2.evaluator import predicted_environment

        assert predicted_environment(env.task, traj, "telecom").hashes() == env.tau2_env.hashes()
        user_calls = [c for m in traj if m["role"] == "user" and m.get("tool_calls") for c in m["tool_calls"]]
        assert all(c["requestor"] == "user" for c in user_calls)
        # user device traffic is invisible to the agent
        assert not any(m.get("tool_calls") and m["tool_calls"][0]["function"]["name"] in {c["name"] for c in user_calls}
                       for m in info["messages"] if m["role"] == "assistant")


def test_solo_mode_done_tool_ends_the_episode():
    env = _make("telecom", solo_mode=True)
    for rec in _corpus_records("telecom", "gold_solo")[:10]:
        obs, info = env.reset(seed=0, options={"task_id": rec["task_id"]})
        names = [t["function"]["name"] for t in info["tools"]]
        assert names[-1] == "done" and "toggle_airplane_mode" in names
        assert "<ticket>" in info["messages"][0]["content"]
        assert len(info["messages"]) == 1  # no greeting in solo mode
        for m in rec["messages"]:
            if m.get("tool_calls"):
                out = env.step(json.dumps({"name": m["tool_calls"][0]["name"], "arguments": m["tool_calls"][0]["arguments"]}))
                assert not out[2]
        obs, reward, term, trunc, info = env.step('{"name": "done", "arguments": {}}')
        assert term and info["termination_reason"] == "agent_stop" and reward == 1.0
        assert env.tau2_trajectory()[-1] == {"role": "assistant", "content": "###STOP###", "tool_calls": None}


def test_solo_text_message_is_an_agent_error():
    env = _make("mock", solo_mode=True)
    env.reset(seed=0)
    obs, reward, term, trunc, info = env.step("Hello?")
    assert term and reward == 0.0 and info["termination_reason"] == "agent_error"


def test_airline_has_no_solo_mode():
    with pytest.raises(ValueError, match="does not support solo mode"):
        _make("airline", solo_mode=True)


def test_step_limit_counts_tau2_steps_and_truncates():
    env = _make("retail", max_steps=7)
    _, info = env.reset(seed=3)
    assert info["tau2_steps"] == 1  # the user's opening message (the greeting is not a step)
    call = '{"name": "list_all_product_types", "arguments": {}}'
    _, r, term, trunc, info = env.step(call)  # agent message + tool results = 2 steps
    assert info["tau2_steps"] == 3 and not (term or trunc)
    _, r, term, trunc, info = env.step(call)
    assert info["tau2_steps"] == 5 and not (term or trunc)
    _, r, term, trunc, info = env.step(call)
    assert trunc and not term and r == 0.0 and info["termination_reason"] == "max_steps"
    assert info["reward_info"]["info"]["note"].endswith("max_steps")
    with pytest.raises(RuntimeError):
        env.step(call)


def test_too_many_errors_terminates_with_zero():
    env = _make("retail", max_errors=3)
    env.reset(seed=1)
    bad = json.dumps([{"name": "get_order_details", "arguments": {"order_id": "#nope"}}] * 2)
    _, r, term, trunc, info = env.step(bad)
    assert not term and info["num_errors"] == 2 and len(info["tool_errors"]) == 2
    _, r, term, trunc, info = env.step(bad)
    assert term and not trunc and r == 0.0 and info["termination_reason"] == "too_many_errors"


def test_user_stop_tokens_end_the_episode():
    for token in ("###STOP###", "###TRANSFER###", "###OUT-OF-SCOPE###"):
        env = _make("mock")
        env._user_spec = ReplayUser([{"role": "user", "content": "hi"}, {"role": "user", "content": f"bye {token}"}])
        env.reset(seed=0, options={"task_id": "create_task_1"})
        _, r, term, trunc, info = env.step("How can I help?")
        assert term and info["termination_reason"] == "user_stop"
        assert info["messages"][-1] == {"role": "user", "content": f"bye {token}"}


def test_agent_stop_text_and_transfer_tool():
    env = _make("mock")
    env.reset(seed=0, options={"task_id": "create_task_1"})
    _, r, term, trunc, info = env.step("Thanks! ###STOP###")
    assert term and info["termination_reason"] == "agent_stop"
    env = _make("retail")
    env.reset(seed=0)
    _, r, term, trunc, info = env.step('{"name": "transfer_to_human_agents", "arguments": {"summary": "help"}}')
    assert info["messages"][-1]["content"] == "Transfer successful" and not term
    _, r, term, trunc, info = env.step("You are being transferred to a human agent now.")
    assert term and info["messages"][-1]["content"] == "###TRANSFER###"


def test_no_gold_information_before_the_end():
    env = _make("retail")
    _, info = env.reset(seed=5)
    secrets = ("evaluation_criteria", "action_id", "nl_assertions", "communicate_info", "env_assertion", "reward_info")
    steps = ["Could you give me your name and zip code?", '{"name": "list_all_product_types", "arguments": {}}',
             "Would you like me to proceed?"]
    blobs = [json.dumps(info)]
    for a in steps:
        out = env.step(a)
        if out[2] or out[3]:
            break
        blobs.append(json.dumps(out[4]))
    for blob in blobs:
        assert not any(s in blob for s in secrets)
    task = env.task
    gold_ids = [a["action_id"] for a in task["evaluation_criteria"]["actions"]]
    assert not any(g in blob for g in gold_ids for blob in blobs if len(g) > 3)


def test_seeded_task_choice_and_splits():
    env = _make("airline", split="test")
    from trace_gym.tau2.data import load_splits

    test_ids = set(load_splits("airline")["test"])
    ids = [env.reset(seed=s)[1]["task_id"] for s in range(6)]
    assert all(i in test_ids for i in ids)
    assert ids == [env.reset(seed=s)[1]["task_id"] for s in range(6)]
    assert len(set(ids)) > 1
    _, info = env.reset(seed=0, options={"task_id": "7"})
    assert info["task_id"] == "7"
    _, info = env.reset(seed=0, options={"split": "train"})
    assert info["task_id"] in set(load_splits("airline")["train"])
    with pytest.raises(ValueError, match="unknown airline task id"):
        env.reset(options={"task_id": "nope"})
    with pytest.raises(ValueError, match="Invalid task split"):
        env.reset(options={"split": "nope"})


def test_task_passed_directly_and_malformed_task_rejected():
    from trace_gym.tau2.data import TaskFileError, load_tasks

    env = _make("mock")
    task = dict(next(t for t in load_tasks("mock") if t["id"] == "create_task_1"))
    task["id"] = "synthetic-1"
    _, info = env.reset(seed=0, options={"task": task})
    assert info["task_id"] == "synthetic-1"
    with pytest.raises(TaskFileError):
        env.reset(options={"task": {"id": 3}})


def test_message_history_task_opens_with_the_history_and_a_user_turn():
    env = _make("mock")
    obs, info = env.reset(seed=0, options={"task_id": "update_task_with_message_history"})
    roles = [m["role"] for m in info["messages"]]
    assert roles[:5] == ["system", "user", "assistant", "tool", "assistant"]
    assert roles[-1] == "user" and "Hi! How can I help you today?" not in obs
    _, r, term, _, info = env.step('{"name": "update_task_status", "arguments": {"task_id": "task_2", "status": "completed"}}')
    _, r, term, _, info = env.step("Done, the task is completed. ###STOP###")
    assert term and r == 1.0


def test_system_prompt_is_our_frame_around_the_policy():
    from trace_gym.tau2.data import load_policy

    env = _make("airline")
    _, info = env.reset(seed=0)
    system = info["messages"][0]["content"]
    assert load_policy("airline") in system
    assert "You are a customer service agent that helps the user" not in system  # not tau2's wording
    assert info["messages"][1] == {"role": "assistant", "content": "Hi! How can I help you today?"}
    from trace_gym.tau2.domain_spec import load_domain

    assert info["tools"] == [t["openai_schema"] for t in load_domain("airline").tools]


def test_judge_spec_and_unjudged_nl_policies():
    from trace_gym.tau2.judge import FunctionJudge, OpenAICompatibleJudge

    env = _make("retail", judge={"model": "m", "base_url": "http://127.0.0.1:9"})
    assert isinstance(env.judge, OpenAICompatibleJudge)
    with pytest.raises(ValueError):
        _make("retail", judge=42)
    with pytest.raises(ValueError):
        _make("retail", unjudged_nl="maybe")
    rec = next(r for r in _corpus_records("retail", "gold") if r["expected"]["nl_assertions_judged"] is False)
    for kw, want in (({}, 0.0), ({"unjudged_nl": "ignore"}, 1.0), ({"judge": FunctionJudge(lambda m, a: True)}, 1.0),
                     ({"judge": FunctionJudge(lambda m, a: False)}, 0.0)):
        env = _make("retail", **kw)
        obs, reward, term, trunc, info = drive(env, rec)
        assert reward == want, kw
        if "judge" not in kw:
            assert info["reward_info"]["nl_assertions_judged"] is False and "not judged" in info["reward_info"]["nl_note"]


def test_openai_messages_convert_to_tau2_form():
    from trace_gym.tau2.env import to_tau2_messages

    env = _make("mock")
    _, info = env.reset(seed=0, options={"task_id": "create_task_1"})
    env.step('{"name": "create_task", "arguments": {"user_id": "user_1", "title": "Important Meeting"}}')
    assert "action_error" in env.step('{"name": "broken"')[4]  # a format error: not in the scored conversation
    *_, info = env.step("All done! ###STOP###")
    converted = to_tau2_messages(env.transcript())
    live = [m for m in env.tau2_trajectory() if not (m["role"] == "user" and m.get("tool_calls"))]
    strip = [{k: v for k, v in m.items() if k != "requestor" or m["role"] != "tool"} for m in live]
    assert [{k: v for k, v in m.items() if k != "requestor" or m["role"] != "tool"} for m in converted] == strip
    assert info["reward_info"]["reward"] == 1.0
