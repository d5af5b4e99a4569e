import gymnasium as gym
import pytest

from tests.core.counter_env import CounterEnv
from trace_gym.core import render_messages


def test_episode_flow_reward_and_info():
    env = gym.make("trace-test/counter-v0")
    obs, info = env.reset(seed=3)
    target = env.unwrapped.target
    assert "[tools]" in obs and "bring the counter" in obs
    assert [t["function"]["name"] for t in info["tools"]] == ["get_count", "add"]
    obs, r, term, trunc, info = env.step(f'<tool_call>{{"name": "add", "arguments": {{"amount": {target}}}}}</tool_call>')
    assert obs.startswith("[tool add]") and not term and r == 0.0
    obs, r, term, trunc, info = env.step("All done, bye!")
    assert term and not trunc and r == 1.0
    assert info["reward_info"] == {"count": target, "target": target}
    assert info["termination_reason"] == "agent_stop"
    roles = [m["role"] for m in info["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    with pytest.raises(RuntimeError, match="reset"):
        env.step("again")


def test_step_limit_truncates_and_scores():
    env = gym.make("trace-test/counter-v0", max_steps=2)
    env.reset(seed=0)
    env.step("hi")
    _, r, term, trunc, info = env.step("hi")
    assert trunc and not term and info["termination_reason"] == "max_steps" and r == 0.0


def test_malformed_action_is_feedback_not_state():
    env = gym.make("trace-test/counter-v0")
    env.reset(seed=0)
    u = env.unwrapped
    before = u.transcript()
    obs, r, term, trunc, info = env.step('{"name": "add", "arguments": {"amount": 1}')
    assert "not executed" in obs and "not valid JSON" in info["action_error"]
    assert u.count == 0 and u.transcript() == before
    assert info["messages"][-1]["name"] == "env_feedback"  # the policy sees what went wrong


def test_several_calls_in_one_action_run_in_order():
    env = gym.make("trace-test/counter-v0")
    env.reset(seed=0)
    obs, *_ , info = env.step("add(amount=2)\nadd(amount=3)\nget_count()")
    assert env.unwrapped.count == 5
    tool_msgs = [m for m in info["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_msgs] == ['{"count": 2}', '{"count": 5}', '{"count": 5}']
    ids = [tc["id"] for tc in info["messages"][-4]["tool_calls"]]
    assert ids == [m["tool_call_id"] for m in tool_msgs]


def test_render_modes():
    env = gym.make("trace-test/counter-v0", render_mode="ansi")
    env.reset(seed=0)
    env.step("hello")
    text = env.render()
    assert "[user]" in text and "[assistant]\nhello" in text
    assert render_messages([]) == ""
    with pytest.raises(ValueError, match="render_mode"):
        gym.make("trace-test/counter-v0", render_mode="rgb_array")


# ------------------------------------------------------------------ the generic hooks

class HookedCounter(CounterEnv):
    """Uses the hooks the way an environment family with its own bookkeeping does."""

    def __init__(self, end_at_opening: str | None = None, **kw):
        super().__init__(**kw)
        self.end_at_opening = end_at_opening
        self.rejected = 0
        self.acted: list[str] = []

    def _start(self, options):
        episode = super()._start(options)
        self.rejected = 0
        self.acted = []
        if self.end_at_opening is not None:
            self.end(self.end_at_opening)
        return episode

    def _reject(self, action, error, extra):
        super()._reject(action, error, extra)
        self.rejected += 1
        if self.rejected >= 2:
            self.end("too_many_errors")

    def _act_calls(self, parsed, extra):
        self.acted.append("calls")
        super()._act_calls(parsed, extra)
        if self.count > self.target:
            self.end("agent_stop")
            self.end("overshoot", replace=True)  # a later reason that must win

    def _act_message(self, parsed, extra):
        self.acted.append("message")
        if parsed.content == "give up":
            self.messages.append({"role": "assistant", "content": parsed.content})
            self.end("max_steps")  # the family's own step count ran out: a truncation
            return
        super()._act_message(parsed, extra)

    def _info_fields(self):
        return {"rejected": self.rejected}

    def _final_info(self):
        return {"acted": list(self.acted)}


def test_an_opening_that_ends_the_episode_executes_nothing_at_the_first_step():
    env = HookedCounter(end_at_opening="user_stop")
    env.reset(seed=0)
    before = list(env.messages)
    obs, r, term, trunc, info = env.step("add(amount=1)")
    assert term and not trunc and obs == "" and info["termination_reason"] == "user_stop"
    assert env.count == 0 and env.messages == before and info["acted"] == []
    env.end_at_opening = None
    env.reset(seed=0)  # reset clears the reason
    _, _, term, _, _ = env.step("add(amount=1)")
    assert not term and env.count == 1


def test_hooks_see_every_action_and_add_info():
    env = HookedCounter()
    _, info = env.reset(seed=0)
    assert list(info)[:4] == ["messages", "tools", "step", "rejected"] and info["rejected"] == 0
    _, _, term, _, info = env.step("add(amount=")
    assert not term and info["rejected"] == 1 and "action_error" in info
    _, _, term, _, info = env.step("hello")
    assert not term and info["messages"][-1] == {"role": "user", "content": "ok"} and "acted" not in info
    _, r, term, trunc, info = env.step("add(amount=")
    assert term and not trunc and info["termination_reason"] == "too_many_errors"
    assert list(info)[-3:] == ["reward_info", "termination_reason", "acted"] and info["acted"] == ["message"]


def test_a_replacing_end_wins_and_max_steps_means_truncation():
    env = HookedCounter()
    env.reset(seed=0)
    _, _, term, trunc, info = env.step(f"add(amount={env.target + 1})")
    assert term and not trunc and info["termination_reason"] == "overshoot"
    assert [m["role"] for m in info["messages"]][-2:] == ["assistant", "tool"]
    env.reset(seed=0)
    _, r, term, trunc, info = env.step("give up")
    assert trunc and not term and info["termination_reason"] == "max_steps" and r == 0.0


def test_tool_env_is_the_only_step_loop():
    from trace_gym.capabilities.env import CapabilityEnv
    from trace_gym.tau2.env import Tau2Env
    from trace_gym.toolsandbox.env import ToolSandboxEnv

    for cls in (Tau2Env, CapabilityEnv, ToolSandboxEnv):
        assert "step" not in vars(cls), cls  # the families fill hooks instead
    assert "reset" not in vars(Tau2Env) and "reset" not in vars(ToolSandboxEnv)
