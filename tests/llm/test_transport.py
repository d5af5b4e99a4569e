"""The one HTTP transport and the cassettes, against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

from tests.helpers_llm import completion, server_fixture, tool_call  # noqa: F401 (server fixture)
from trace_gym.llm import (
    CassetteClient,
    CassetteMiss,
    ChatClient,
    ChatReply,
    FunctionChatClient,
    LLMError,
    OpenAIChatClient,
    PolicyChatClient,
    request_key,
)

MESSAGES = [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi", "name": "ignored-field"}]
TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}]


def _client(server, **kw):
    kw.setdefault("sleep", lambda s: None)
    kw.setdefault("timeout", 5.0)  # bounded: a hung server fails the test instead of stalling it
    return OpenAIChatClient(server.url, "served-model", api_key="sk-test", **kw)


def test_chat_sends_one_request_and_parses_the_reply(server):
    server.push(completion("Let me check.", [tool_call("lookup", '{"id": 7}'), tool_call("lookup", '{"id": ', 1)]))
    client = _client(server, temperature=0.2, max_tokens=50, extra_body={"top_p": 0.9})
    assert isinstance(client, ChatClient)
    reply = client.chat(MESSAGES, tools=TOOLS, seed=3, max_tokens=20)
    assert reply.content == "Let me check."
    assert reply.tool_calls[0] == {"id": "chatcmpl-tool-0", "name": "lookup", "arguments": {"id": 7}}
    assert reply.tool_calls[1]["arguments"] == '{"id": '  # broken JSON is kept for the caller to report
    req = server.requests[0]
    assert req["path"] == "/v1/chat/completions" and req["headers"]["Authorization"] == "Bearer sk-test"
    assert req["body"] == {"model": "served-model", "messages": [MESSAGES[0], {"role": "user", "content": "hi"}],
                           "tools": TOOLS, "temperature": 0.2, "max_tokens": 20, "seed": 3, "top_p": 0.9}


def test_retries_transient_errors_and_honours_retry_after(server):
    slept = []
    server.push({"error": {"message": "overloaded"}}, status=503)
    server.push({"error": "busy"}, status=429, headers={"Retry-After": "1.5"})
    server.push(completion("ok"))
    client = _client(server, backoff=0.25, sleep=slept.append)
    assert client.chat(MESSAGES).text == "ok"
    assert client.requests_sent == 3 and slept == [0.25, 1.5]
    assert "tools" not in server.requests[0]["body"] and "seed" not in server.requests[0]["body"]


def test_errors_name_the_endpoint_and_the_reason(server):
    server.push({"error": {"message": "model 'x' does not exist"}}, status=404)
    client = _client(server)
    with pytest.raises(LLMError, match="HTTP 404: model 'x' does not exist"):
        client.chat(MESSAGES)
    assert client.requests_sent == 1  # a client error is not retried
    server.push(b"<html>gateway</html>")
    with pytest.raises(LLMError, match="not JSON"):
        client.chat(MESSAGES)
    server.push({"choices": []})
    with pytest.raises(LLMError, match=f"{server.url}/chat/completions: the server's response has no choices"):
        client.chat(MESSAGES)
    for _ in range(2):
        server.push({"error": "down"}, status=502)
    with pytest.raises(LLMError, match="no answer after 2 attempts; last error: HTTP 502: down"):
        _client(server, max_retries=1).chat(MESSAGES)


def test_clients_pickle(server):
    import pickle

    server.push(completion("after pickling"))
    client = pickle.loads(pickle.dumps(OpenAIChatClient(server.url, "served-model", timeout=5.0)))
    assert client.chat(MESSAGES).text == "after pickling" and client.requests_sent == 1


def test_unreachable_endpoint():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    client = OpenAIChatClient(f"http://127.0.0.1:{port}/v1", "m", max_retries=1, timeout=5.0, sleep=lambda s: None)
    with pytest.raises(LLMError, match="no answer after 2 attempts; last error: cannot reach the server"):
        client.chat(MESSAGES)
    with pytest.raises(ValueError):
        OpenAIChatClient("ftp://x", "m")


def test_cassette_records_over_http_and_replays_offline(server, tmp_path):
    cas = tmp_path / "c.jsonl"
    server.push(completion("first"))
    server.push(completion(None, [tool_call("lookup", "{}")]))
    rec = CassetteClient(cas, "record", _client(server), model="served-model")
    a = rec.chat(MESSAGES, seed=1, temperature=0.7)
    b = rec.chat(MESSAGES, tools=TOOLS, seed=1, temperature=0.7)
    assert rec.chat(MESSAGES, seed=1, temperature=0.7) == a and len(server.requests) == 2  # recorded answers are reused
    server.close()
    replay = CassetteClient(cas, "replay", model="served-model")
    assert replay.chat(MESSAGES, seed=1, temperature=0.7) == a == ChatReply("first")
    assert replay.chat(MESSAGES, tools=TOOLS, seed=1, temperature=0.7) == b
    assert b.tool_calls[0]["name"] == "lookup" and b.content is None
    lines = [json.loads(line) for line in cas.read_text().splitlines()]
    assert lines[0]["response"] == "first" and "tool_calls" not in lines[0] and lines[1]["tool_calls"]
    with pytest.raises(CassetteMiss, match="no recorded answer") as miss:
        replay.chat(MESSAGES, seed=2, temperature=0.7)
    assert isinstance(miss.value, LLMError) and isinstance(miss.value, KeyError)
    # tools and max_tokens are part of the key only when given, so older cassettes stay valid
    assert request_key("m", MESSAGES, 1, 0.7) == request_key("m", MESSAGES, 1, 0.7, tools=None)
    assert request_key("m", MESSAGES, 1, 0.7) != request_key("m", MESSAGES, 1, 0.7, tools=TOOLS)
    with pytest.raises(FileNotFoundError):
        CassetteClient(tmp_path / "missing.jsonl", "replay")
    (tmp_path / "bad.jsonl").write_text("{not json\n")
    with pytest.raises(ValueError, match="corrupt cassette line"):
        CassetteClient(tmp_path / "bad.jsonl", "replay")


def test_in_process_clients():
    class Echo:
        policy_id = "echo"

        def __init__(self):
            self.seeds = []

        def reset(self, seed):
            self.seeds.append(seed)

        def act(self, messages, tools):
            return '<tool_call>{"name": "lookup", "arguments": {}}</tool_call>' if tools else messages[-1]["content"]

    policy = Echo()
    client = PolicyChatClient(policy)
    assert client.model == "echo" and client.chat([{"role": "user", "content": "x"}], seed=4).text == "x"
    assert client.chat([{"role": "user", "content": "x"}], tools=TOOLS).tool_calls[0]["name"] == "lookup"
    assert policy.seeds == [4]
    fn = FunctionChatClient(lambda m: 1 / 0)
    with pytest.raises(LLMError, match="ZeroDivisionError"):
        fn.chat(MESSAGES)


def test_importing_the_layer_and_running_an_episode_imports_no_http_client(tau2_data):
    code = ("import sys, gymnasium as gym, trace_gym\n"
            "from trace_gym.llm import OpenAIChatClient\n"
            "OpenAIChatClient('http://127.0.0.1:1/v1', 'm')\n"
            "env = gym.make('trace/tau2-mock-v0'); env.reset(seed=0); env.step('hello')\n"
            "print(sorted(m for m in ('urllib.request', 'http.client') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"
