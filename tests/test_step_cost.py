"""A step's cost is bounded: linear in the new action, bounded in the history.

Each test pins one root cause of a slow step found by ``benchmarks/fuzz.py``: ROUGE-L over huge
messages at the end of a ToolSandbox episode, the offline users reading a whole huge agent message
with dozens of scans and regexes, and capability rewards normalising the whole agent text once per
phrase.  Costs are CPU times compared as ratios within one test (robust on a loaded machine), with
generous bounds: the fixed code is far inside them, the old code far outside.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from trace_gym.capabilities.rewards import EpisodeLog, evaluate_rewards, normalize_text


def _cpu(fn, repeat: int = 3) -> float:
    """The least CPU time of ``repeat`` calls of ``fn(i)`` (``i`` lets a call avoid a warm cache)."""
    best = float("inf")
    for i in range(repeat):
        t = time.process_time()
        fn(i)
        best = min(best, time.process_time() - t)
    return max(best, 1e-4)


# --------------------------------------------------------------------------- ToolSandbox ROUGE-L

_WORDS = ["the", "a", "turned", "turning", "turns", "wifi", "off", "on", "is", "running", "runs", "happy", "happiness",
          "cat", "cats", "12", "3", "Mom's", "message", "reminder's", "buy", "milk", "<think>", "!?", "\u00e9t\u00e9"]
_texts = st.lists(st.sampled_from(_WORDS), max_size=60).map(" ".join)


@given(_texts, _texts)
def test_rouge_l_is_rouge_scores_rouge_l(target, prediction):
    from rouge_score import rouge_scorer

    from trace_gym.toolsandbox.similarity import rouge_l

    want = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True).score(target=target, prediction=prediction)
    assert rouge_l(target, prediction) == float(np.float32(want["rougeL"].fmeasure))


def test_rouge_l_is_linear_in_a_long_prediction_and_skips_a_huge_one():
    from trace_gym.toolsandbox.similarity import ROUGE_MAX_CHARS, rouge_l

    target = "Wifi is turned off"
    assert rouge_l(target, "x " * ROUGE_MAX_CHARS) == 0.0 and rouge_l("x " * ROUGE_MAX_CHARS, target) == 0.0
    assert rouge_l(target, "<think>" * 200_000 + target) == 0.0  # over the limit: not read
    # under the limit, doubling the prediction at most about doubles the cost (the LCS is one pass, not a table)
    small = _cpu(lambda i: [rouge_l(target, f"{i} {j} " + "wifi is off and turned " * 100) for j in range(20)])
    large = _cpu(lambda i: [rouge_l(target, f"{i} {j} " + "wifi is off and turned " * 400) for j in range(20)])
    assert large < 12 * small


def _bus_with_messages(content_size: int, n: int, tag: str):
    """A ToolSandbox episode where the agent sent ``n`` text messages of ``content_size`` characters."""
    import gymnasium as gym

    from trace_gym.core import format_tool_call

    env = gym.make("trace/toolsandbox-v0", scenario="send_message_with_phone_number_and_content",
                   disable_env_checker=True).unwrapped
    env.reset(seed=0)
    for k in range(n):
        body = f"{tag} {k} " + "How is the new job going " * (content_size // 25)
        _, _, term, trunc, info = env.step(format_tool_call("send_message_with_phone_number",
                                                            {"phone_number": "+12453344098", "content": body}))
        assert "tool_errors" not in info and not (term or trunc)
    return env.scenario, env.sandbox.messages, env.sandbox.db_snapshots()


@pytest.mark.usefixtures("toolsandbox_data")
def test_toolsandbox_scoring_is_bounded_in_the_size_of_earlier_messages():
    from trace_gym.toolsandbox.evaluation import evaluate

    n = 6
    small = [_bus_with_messages(100, n, f"s{i}") for i in range(3)]
    huge = [_bus_with_messages(300_000, n, f"h{i}") for i in range(3)]
    t_small = _cpu(lambda i: evaluate(*small[i]))
    t_huge = _cpu(lambda i: evaluate(*huge[i]))
    # before: ROUGE-L over 6 x 300k characters took seconds, thousands of times a small episode's scoring
    assert t_huge < 25 * t_small + 0.05, (t_small, t_huge)


# --------------------------------------------------------------------------- offline users


def _toolsandbox_user_cost(agent_text: str) -> tuple[float, str | None]:
    from trace_gym.toolsandbox.offline_user import OfflineUser
    from trace_gym.toolsandbox.scenarios import load_scenarios

    scenario = load_scenarios()["send_message_with_phone_number_and_content"]
    bus = [{"sender": "USER", "recipient": "AGENT", "content": "Send a message to +12453344098."},
           {"sender": "AGENT", "recipient": "USER", "content": agent_text}]
    user = OfflineUser()
    replies = []

    def run(i):
        user.reset(scenario)
        replies.append(user.respond(bus).content)

    return _cpu(run, 5), replies[-1]


@pytest.mark.usefixtures("toolsandbox_data")
def test_toolsandbox_offline_user_reads_a_bounded_part_of_a_huge_message():
    question = " Shall I send it?"
    t_mid, short_reply = _toolsandbox_user_cost("word, " * 40_000 + question)
    t_huge, huge_reply = _toolsandbox_user_cost("word, " * 400_000 + question)
    assert short_reply == huge_reply == "Yes, please go ahead."  # the question at the end is still read
    assert t_huge < 3 * t_mid + 0.005, (t_mid, t_huge)


def _tau2_user_cost(agent_text: str) -> tuple[float, str | None]:
    from trace_gym.tau2.users import OfflineUser, UserContext

    task = {"id": "t", "user_scenario": {"instructions": {"reason_for_call": "You want to return a lamp.",
                                                          "known_info": "You are Ann Lee."}}}
    user = OfflineUser()
    replies = []

    def run(i):
        user.reset(UserContext(task=task, domain="retail"))
        user.respond([{"role": "assistant", "content": "Hi! How can I help?", "tool_calls": None}])
        replies.append(user.respond([{"role": "assistant", "content": agent_text, "tool_calls": None}])["content"])

    return _cpu(run, 3), replies[-1]


def test_tau2_offline_user_reads_a_bounded_part_of_a_huge_message():
    tail = " Shall I proceed with the return (yes/no)?"
    # "transfer" many times with no "agent" after it was quadratic in the old transfer rule
    t_mid, short_reply = _tau2_user_cost("transfer the lamp, " * 2_000 + tail)
    t_huge, huge_reply = _tau2_user_cost("transfer the lamp, " * 8_000 + tail)
    assert short_reply == huge_reply and short_reply.startswith("Yes")
    assert t_huge < 3 * t_mid + 0.005, (t_mid, t_huge)


# --------------------------------------------------------------------------- capability rewards


def test_capability_rewards_normalise_the_agent_text_once():
    events = [{"kind": "agent", "text": f"Message {k}: the total is 1,234 dollars. " * 2_500} for k in range(20)]
    events.append({"kind": "user", "text": "ok"})
    rewards = [{"type": "refusal"}, {"type": "communicated", "any_of": ["1234 dollars"]},
               {"type": "ordering", "first": {"agent_says_any": ["message 19"]}, "then": {"user_says_any": ["ok"]}}]
    joined = "\n".join(e["text"] for e in events if e["kind"] == "agent")

    def score(i):
        reward, info = evaluate_rewards(rewards, EpisodeLog(events=list(events), initial_db={}, final_db={}))
        assert info["components"]["communicated_1"] == 1.0 and info["components"]["ordering_2"] == 1.0

    t_once = _cpu(lambda i: normalize_text(joined))
    # the agent text once, each event once for the ordering check; before: once per refusal phrase (14) and more
    assert _cpu(score) < 5 * t_once, t_once


def test_normalize_text_removes_only_thousands_separators():
    assert normalize_text("A $1,234,567 total, 12,34 and 1,2345 and ,123 at 5,000.") == \
        "a 1234567 total, 12,34 and 12345 and ,123 at 5000."
