"""``trace-gym serve`` under faults, on 127.0.0.1: one test per way a client (or the operator) can hurt it.

Each test drives the real server (a subprocess) with a raw WebSocket client, so it can send what
OpenEnv's client never would, and checks that the session it hurt plays on exactly like the same
episode in process: nothing a client sends ends another step's result unseen, closes a session the
bad frame did not own, or changes state when the request fails.
"""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import time
import urllib.error
import urllib.request

import pytest

from tests.extras import need  # noqa: E402

need("openenv")

from websockets.exceptions import ConnectionClosed  # noqa: E402
from websockets.sync.client import connect  # noqa: E402

from tests.integrations.env_server import as_played, in_process, start_server  # noqa: E402
from trace_gym.integrations.openenv_server import ServerProcess  # noqa: E402

pytestmark = pytest.mark.usefixtures("tau2_data")
TIMEOUT_S = 60


@pytest.fixture(scope="module")
def server():
    s = start_server("--max-sessions", "4")
    try:
        yield s
    finally:
        s.stop()


class Session:
    """A raw WebSocket session: send any frame, read the one reply."""

    opened: list[Session] = []  # closed after each test, passed or not (a failed one must not hold a slot)

    def __init__(self, server: ServerProcess):
        self.ws = connect(server.ws_url, open_timeout=TIMEOUT_S, max_size=None)
        Session.opened.append(self)

    def ask(self, frame: str | bytes) -> dict:
        self.ws.send(frame)
        return json.loads(self.ws.recv(timeout=TIMEOUT_S))

    def reset(self, seed: int, **data) -> dict:
        return self.ask(json.dumps({"type": "reset", "data": {"seed": seed, **data}}))

    def step(self, text: str) -> dict:
        return self.ask(json.dumps({"type": "step", "data": {"text": text}}))

    def state(self) -> dict:
        reply = self.ask(json.dumps({"type": "state"}))
        assert reply["type"] == "state", reply
        return reply["data"]

    def close(self) -> None:
        self.ws.close()


@pytest.fixture(autouse=True)
def _close_sessions():
    yield
    while Session.opened:
        Session.opened.pop().close()


def _error(reply: dict, code: str) -> str:
    assert reply["type"] == "error" and reply["data"]["code"] == code, reply
    return reply["data"]["message"]


def _play_rest(session: Session, expected: list, actions: list[str], start: int) -> None:
    """Play ``actions[start:]``: every reply equals the in-process episode's, the last one with its reward."""
    for k in range(start, len(actions)):
        assert as_played(session.step(actions[k])) == expected[k + 1]
    assert expected[-1][2] and expected[-1][1] == 1.0


def test_a_lone_surrogate_is_refused_before_the_env_sees_it_and_the_episode_plays_on(server):
    expected, actions = in_process(0)
    s = Session(server)
    assert as_played(s.reset(0)) == expected[0]
    assert as_played(s.step(actions[0])) == expected[1]
    for frame in ('{"type": "step", "data": {"text": "x\\ud800"}}',
                  '{"type": "step", "data": {"text": "\\udc00 and more"}}',
                  '{"type": "reset", "data": {"seed": 1, "options": {"case": "\\ud800"}}}',
                  '{"type": "reset", "data": {"seed": 1, "episode_id": "e\\udfff"}}',
                  '{"type": "step", "data": {"text": "ok", "metadata": {"\\ud800": 1}}}'):
        assert "surrogate" in _error(s.ask(frame), "VALIDATION_ERROR")
    assert s.state()["step_count"] == 1 and s.state()["seed"] == 0
    _play_rest(s, expected, actions, 1)
    s.close()


@pytest.mark.parametrize("data", [
    {"seed": 5, "episode_id": 123},
    {"seed": 5, "episode_id": "e" * 300},
    {"seed": -1},
    {"seed": "5"},
    {"seed": True},
    {"seed": 5.5},
    {"seed": 5, "options": "case"},
    {"seed": 5, "options": {"no_such_option": 1}},
    {"seed": 5, "options": {"case": "no-such-case"}},
    {"seed": 5, "bogus": 1},
], ids=lambda d: json.dumps(d)[:40])
def test_a_refused_reset_changes_nothing(server, data):
    expected, actions = in_process(0)
    s = Session(server)
    s.reset(0, episode_id="first")
    assert as_played(s.step(actions[0])) == expected[1]
    before = s.state()
    _error(s.ask(json.dumps({"type": "reset", "data": data})), "VALIDATION_ERROR")
    assert s.state() == before and before["seed"] == 0 and before["episode_id"] == "first"
    _play_rest(s, expected, actions, 1)
    s.close()


NOT_MESSAGES: list[str | bytes] = [
    "", " ", "{not json", "[]", "null", "42", "-1.5e300", "true", '"step"', "{}", '{"type": 5}', '{"type": null}',
    '{"type": ["step"]}', '{"type": "teleport"}', '{"type": "step"}', '{"type": "step", "data": []}',
    '{"type": "step", "data": {"text": 5}}', '{"type": "step", "data": {"wrong": "x"}}',
    '{"type": "step", "data": {"text": "x", "extra": 1}}', '{"type": "reset", "data": 7}',
    '{"type": "state", "data": {"x": 1}}', '{"type": "mcp", "data": {}}', "[" * 100_000 + "]" * 100_000,
    '{"type": "step", "data": ' + '{"a": ' * 50_000 + "1" + "}" * 50_000 + "}", "9" * 5_000,
    '{"type": "reset", "data": {"seed": ' + "9" * 5_000 + "}}", '{"type": "step", "data": {"text": "x"}} trailing',
    "\x00", b"\x00\x01binary", b'{"type": "step", "data": {"text": "x"}}', b"",
]


def test_frames_that_are_not_messages_get_an_error_and_the_session_plays_on(server):
    expected, actions = in_process(0)
    s = Session(server)
    s.reset(0)
    assert as_played(s.step(actions[0])) == expected[1]
    for frame in NOT_MESSAGES:
        reply = s.ask(frame)
        assert reply["type"] == "error" and reply["data"]["message"], (frame[:40], reply)
    assert s.state()["step_count"] == 1
    _play_rest(s, expected, actions, 1)
    s.close()


def test_a_step_after_the_end_or_before_a_reset_is_refused_and_changes_nothing(server):
    expected, actions = in_process(0)
    s = Session(server)
    assert _error(s.step("hello"), "EXECUTION_ERROR").startswith("no open episode")
    s.reset(0)
    _play_rest(s, expected, actions, 0)
    end = s.state()
    assert end["done"] and _error(s.step("hello"), "EXECUTION_ERROR").startswith("no open episode")
    assert s.state() == end
    s.close()


def test_http_routes_either_work_without_an_env_or_are_not_served(server):
    for path in ("/health", "/schema", "/metadata"):
        with urllib.request.urlopen(server.url + path, timeout=TIMEOUT_S) as r:
            assert r.status == 200 and json.load(r)
    for method, path in (("POST", "/reset"), ("POST", "/step"), ("GET", "/state"), ("POST", "/mcp"),
                         ("GET", "/list_environments"), ("GET", "/docs")):
        body = b'{"action": {"text": "hi"}}' if method == "POST" else None
        request = urllib.request.Request(server.url + path, data=body, method=method,
                                         headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(request, timeout=TIMEOUT_S)
        assert err.value.code == 404, (path, err.value.code)
        if path in ("/reset", "/step", "/state"):
            assert "/ws" in json.load(err.value)["detail"]


def _fill(server: ServerProcess, n: int) -> list[Session]:
    sessions = [Session(server) for _ in range(n)]
    for k, s in enumerate(sessions):
        assert s.reset(k)["type"] == "observation"
    return sessions


def test_capacity_refusals_are_fast_and_clear_and_a_closed_session_frees_its_slot_at_once():
    s = start_server("--max-sessions", "2")
    try:
        held = _fill(s, 2)
        t0 = time.monotonic()
        extra = Session(s)
        reply = json.loads(extra.ws.recv(timeout=TIMEOUT_S))  # refused at once, before any request
        assert _error(reply, "CAPACITY_REACHED") and reply["data"]["max_sessions"] == 2
        assert time.monotonic() - t0 < 2.0
        held.pop().close()
        t0 = time.monotonic()
        while True:  # the slot is free as soon as the server has seen the close
            again = Session(s)
            with contextlib.suppress(ConnectionClosed):  # still at capacity: refused, and the server may close first
                if again.reset(9)["type"] == "observation":
                    break
            assert time.monotonic() - t0 < 2.0
            time.sleep(0.01)
        for x in [*held, again]:
            x.close()
    finally:
        rc, out = s.stop()
    assert rc == 0 and "Traceback" not in out, out


def _reset_when_a_slot_is_free(server: ServerProcess, seed: int, within_s: float = 5.0):
    """A raw socket and its WebSocket with an episode reset, as soon as the server has a free slot."""
    t0 = time.monotonic()
    while True:
        raw = socket.create_connection(("127.0.0.1", server.port))
        ws = connect(server.ws_url, sock=raw, open_timeout=TIMEOUT_S)
        with contextlib.suppress(ConnectionClosed):  # refused at capacity: the server may close before the reset
            ws.send(json.dumps({"type": "reset", "data": {"seed": seed}}))
            if json.loads(ws.recv(timeout=TIMEOUT_S))["type"] == "observation":
                return raw, ws
        raw.close()
        assert time.monotonic() - t0 < within_s, "no slot came free"
        time.sleep(0.05)


def test_a_client_dropping_mid_step_frees_its_slot_and_logs_no_traceback():
    s = start_server("--max-sessions", "1")
    call = "<tool_call>" + json.dumps({"name": "get_order_details", "arguments": {"order_id": "#W1"}}) + "</tool_call>"
    try:
        for k in range(5):
            raw, ws = _reset_when_a_slot_is_free(s, k)
            ws.send(json.dumps({"type": "step", "data": {"text": call * 60}}))  # 60 calls: a long reply
            raw.shutdown(socket.SHUT_RDWR)  # a client that vanishes mid-step, without a close frame
            raw.close()
        raw, ws = _reset_when_a_slot_is_free(s, 0)
        ws.close()
    finally:
        rc, out = s.stop()
    assert rc == 0 and "Traceback" not in out and "Error" not in out, out


def test_an_idle_session_is_closed_after_the_idle_timeout_and_frees_its_slot():
    s = start_server("--max-sessions", "1", "--idle-timeout", "1")
    try:
        idle = Session(s)
        idle.reset(0)
        time.sleep(1.5)
        message = _error(json.loads(idle.ws.recv(timeout=TIMEOUT_S)), "IDLE_TIMEOUT")
        assert "idle" in message
        busy = Session(s)  # the slot is free again; a session that keeps talking is not cut off
        busy.reset(0)
        expected, actions = in_process(0)
        for k, a in enumerate(actions):
            time.sleep(0.3)
            assert as_played(busy.step(a)) == expected[k + 1]
        busy.close()
    finally:
        rc, out = s.stop()
    assert rc == 0 and "Traceback" not in out, out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_with_open_sessions_stops_the_server_with_exit_0(sig):
    s = start_server("--max-sessions", "4")
    sessions = _fill(s, 3)
    sessions[0].step("hello")
    t0 = time.monotonic()
    rc, out = s.stop(sig)
    assert rc == 0 and "stopped" in out and "Traceback" not in out, (rc, out)
    assert time.monotonic() - t0 < 15
    for x in sessions:
        x.close()


def test_a_reply_holding_a_lone_surrogate_still_encodes_and_reads_back_exactly():
    """The env never sees one from the wire, but should one reach a reply it travels as JSON's \\u escape."""
    from trace_gym.integrations.openenv_server import _encode

    reply = {"type": "observation", "data": {"observation": {"text": "x\ud800 \u00e9\U0001f600"}}}
    text = _encode(reply)
    text.encode("utf-8")  # what the WebSocket sends
    assert json.loads(text) == reply
    assert _encode({"text": "\u00e9"}) == '{"text": "\u00e9"}'  # valid text is sent as it is
