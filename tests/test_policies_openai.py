"""OpenAICompatPolicy against a real HTTP server on 127.0.0.1 that replays recorded responses."""

from __future__ import annotations

import socket
import threading

import gymnasium as gym
import pytest

try:
    from helpers_envs import ENV_ID
except ImportError:  # tests/ imported as a package
    from tests.helpers_envs import ENV_ID

from trace_gym.core import parse_action
from trace_gym.policies import PolicyError
from trace_gym.policies.openai_compat import OpenAICompatPolicy, completion_to_action
from trace_gym.rollout import rollout

try:
    from helpers_llm import completion, server_fixture, tool_call  # noqa: F401 (server fixture)
except ImportError:  # tests/ imported as a package
    from tests.helpers_llm import completion, server_fixture, tool_call  # noqa: F401 (server fixture)


_completion, _call = completion, tool_call


def _policy(server, **kw):
    kw.setdefault("sleep", lambda s: None)
    return OpenAICompatPolicy(server.url, "served-model", api_key="sk-test", **kw)


MESSAGES = [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}]
TOOLS = [{"type": "function", "function": {"name": "read_note", "description": "d", "parameters": {"type": "object", "properties": {"key": {"type": "string"}}}}}]


def test_plain_content_and_request_shape(server):
    server.push(_completion("Hello! How can I help?"))
    p = _policy(server, temperature=0.3, max_tokens=64, seed=7)
    assert p.act(MESSAGES, TOOLS) == "Hello! How can I help?"
    req = server.requests[0]
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["Authorization"] == "Bearer sk-test"
    assert req["body"] == {"model": "served-model", "messages": MESSAGES, "tools": TOOLS, "temperature": 0.3, "max_tokens": 64, "seed": 7}


def test_tool_calls_become_hermes_text(server):
    server.push(_completion("Let me look.", [_call("read_note", '{"key": "a"}'), _call("read_note", '{"key": "b"}', 1)], "tool_calls"))
    action = _policy(server).act(MESSAGES, TOOLS)
    assert action.startswith("Let me look.\n<tool_call>\n")
    parsed = parse_action(action)
    assert parsed.error is None and parsed.content == "Let me look."
    assert parsed.calls == [("read_note", {"key": "a"}), ("read_note", {"key": "b"})]


def test_broken_arguments_are_kept_for_the_env_to_reject(server):
    server.push(_completion(None, [_call("read_note", '{"key": ')], "tool_calls"))
    parsed = parse_action(_policy(server).act(MESSAGES, TOOLS))
    assert parsed.error is not None and "not valid JSON" in parsed.error


def test_retries_5xx_then_succeeds(server):
    slept: list[float] = []
    server.push({"error": {"message": "overloaded"}}, status=503)
    server.push({"error": {"message": "overloaded"}}, status=500, headers={"Retry-After": "2"})
    server.push(_completion("ok"))
    p = _policy(server, backoff=0.25, sleep=slept.append)
    assert p.act(MESSAGES, []) == "ok"
    assert p.requests_sent == 3 and slept == [0.25, 2.0]
    assert "tools" not in server.requests[0]["body"]


def test_client_error_is_not_retried(server):
    server.push({"object": "error", "message": "bad", "error": {"message": "model 'x' does not exist"}}, status=404)
    p = _policy(server)
    with pytest.raises(PolicyError, match="HTTP 404: model 'x' does not exist"):
        p.act(MESSAGES, [])
    assert p.requests_sent == 1


def test_gives_up_after_max_retries(server):
    for _ in range(3):
        server.push({"error": "down"}, status=502)
    p = _policy(server, max_retries=2)
    with pytest.raises(PolicyError, match="no answer after 3 attempts; last error: HTTP 502: down"):
        p.act(MESSAGES, [])


def test_unreachable_server_is_a_clear_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    p = OpenAICompatPolicy(f"http://127.0.0.1:{port}/v1", "m", max_retries=1, sleep=lambda s: None)
    with pytest.raises(PolicyError, match="no answer after 2 attempts"):
        p.act(MESSAGES, [])


def test_timeout_is_retried(server):
    gate = threading.Event()
    orig = server.httpd.RequestHandlerClass.do_POST

    def slow(self):
        if not gate.is_set():
            gate.set()
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            threading.Event().wait(1.0)  # longer than the client's timeout
            return
        orig(self)

    server.httpd.RequestHandlerClass.do_POST = slow
    server.push(_completion("after timeout"))
    p = _policy(server, timeout=0.3)
    assert p.act(MESSAGES, []) == "after timeout"
    assert p.requests_sent == 2


def test_bad_bodies(server):
    server.push(b"<html>gateway</html>")
    with pytest.raises(PolicyError, match="not JSON"):
        _policy(server).act(MESSAGES, [])
    server.push({"choices": []})
    with pytest.raises(PolicyError, match="no choices"):
        _policy(server).act(MESSAGES, [])
    with pytest.raises(PolicyError, match="malformed tool call"):
        completion_to_action(_completion(None, [{"function": {}}]))


def test_act_batch_is_concurrent_and_ordered(server):
    for _i in range(4):
        server.push(_completion("same"))
    p = _policy(server, concurrency=4)
    out = p.act_batch([([{"role": "user", "content": str(i)}], []) for i in range(4)])
    assert out == ["same"] * 4
    assert sorted(r["body"]["messages"][0]["content"] for r in server.requests) == ["0", "1", "2", "3"]


def test_full_episode_against_the_server(server):
    server.push(_completion(None, [_call("write_note", '{"key": "todo", "text": "call the bank"}')], "tool_calls"))
    server.push(_completion("I saved your note."))
    t = rollout(gym.make(ENV_ID), _policy(server), seed=0, options={"task": 1})
    assert t.reward == 1.0 and t.termination_reason == "user_stop" and t.policy_id == "openai:served-model"
    second = server.requests[1]["body"]["messages"]
    assert second[-2]["tool_calls"][0]["function"]["name"] == "write_note"
    assert second[-1] == {"role": "tool", "content": "saved note 'todo'", "tool_call_id": second[-2]["tool_calls"][0]["id"]}
