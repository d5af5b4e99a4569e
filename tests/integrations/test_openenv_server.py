"""``trace-gym serve ENV_ID``: the real server on 127.0.0.1, OpenEnv's own client class talking to it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import gymnasium as gym
import pytest

from tests.extras import need  # noqa: E402

need("openenv")

import trace_gym  # noqa: E402,F401
from trace_gym.integrations.openenv import TraceAction, TraceEnvClient, json_safe  # noqa: E402

pytestmark = pytest.mark.usefixtures("tau2_data")
ENV = "trace/cap-refund-policy-v0"
ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 120


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, *args: str):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen([sys.executable, "-m", "trace_gym.cli", "serve", ENV, "--port", str(self.port), *args],
                                     cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env={**os.environ, "PYTHONPATH": str(ROOT)})
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited: {self.proc.stdout.read()}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as r:
                    if json.load(r).get("status") == "healthy":
                        return
            except OSError:
                time.sleep(0.5)
        self.stop()
        raise AssertionError("server did not come up")

    def stop(self, timeout: float = 30) -> tuple[int, str]:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        return self.proc.returncode, self.proc.stdout.read()


@pytest.fixture(scope="module")
def server():
    s = Server("--max-sessions", "16")
    try:
        yield s
    finally:
        s.stop()


def _in_process(seed: int) -> tuple[list, list[str]]:
    """(reset then each step's (text, reward, done, info) as JSON, the actions) for the reference episode of seed."""
    env = gym.make(ENV, disable_env_checker=True)
    obs, info = env.reset(seed=seed)
    actions = env.unwrapped.reference_actions()
    out = [(obs, None, False, json_safe(info))]
    for a in actions:
        obs, reward, term, trunc, info = env.step(a)
        out.append((obs, float(reward), bool(term or trunc), json_safe(info)))
        if term or trunc:
            return out, actions[: len(out) - 1]
    return out, actions


def _over_the_wire(url: str, seed: int, actions: list[str], pause: threading.Barrier | None = None) -> list:
    out = []
    with TraceEnvClient(base_url=url, message_timeout_s=60).sync() as env:
        r = env.reset(seed=seed)
        out.append((r.observation.text, r.reward, r.done, r.observation.info))
        for a in actions:
            if pause is not None:
                pause.wait(timeout=60)
            r = env.step(TraceAction(text=a))
            out.append((r.observation.text, r.reward, r.done, r.observation.info))
        state = env.state()
    assert state.env_id == ENV and state.seed == seed and state.step_count == len(actions)
    assert state.done == out[-1][2]
    return out


def test_openenv_reference_episode_over_the_wire_equals_in_process(server):
    for seed in (0, 1):
        expected, actions = _in_process(seed)
        got = _over_the_wire(server.url, seed, actions)
        assert got == expected
        assert got[-1][2] and got[-1][1] == 1.0  # the reference episode ends with full reward


def test_openenv_eight_concurrent_sessions_are_isolated(server):
    seeds = list(range(10, 18))
    plans = {s: _in_process(s) for s in seeds}
    steps = min(len(a) for _, a in plans.values())
    barrier = threading.Barrier(len(seeds))  # every session steps in lock step with the others
    results: dict[int, list] = {}
    errors: list[BaseException] = []

    def run(seed: int) -> None:
        try:
            results[seed] = _over_the_wire(server.url, seed, plans[seed][1][:steps], barrier)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=run, args=(s,)) for s in seeds]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors and not any(t.is_alive() for t in threads)
    for s in seeds:
        assert results[s] == plans[s][0][: steps + 1]
    assert len({json.dumps(results[s][0][3]["messages"]) for s in seeds}) == len(seeds)  # eight different episodes


def test_openenv_malformed_requests_get_errors_and_the_server_keeps_serving(server):
    from websockets.sync.client import connect

    ws_url = server.url.replace("http://", "ws://") + "/ws"
    with connect(ws_url, open_timeout=30) as ws:
        def ask(raw: str) -> dict:
            ws.send(raw)
            return json.loads(ws.recv(timeout=60))

        assert ask("{not json")["type"] == "error"
        assert ask(json.dumps({"type": "step", "data": {"text": "hi"}}))["data"]["message"].startswith("no open episode")
        assert ask(json.dumps({"type": "step", "data": {"wrong": 1}}))["type"] == "error"
        assert ask(json.dumps({"type": "teleport"}))["type"] == "error"
        ok = ask(json.dumps({"type": "reset", "data": {"seed": 3}}))
        assert ok["type"] == "observation" and ok["data"]["observation"]["text"].startswith("[system]")
        assert ask(json.dumps({"type": "step", "data": {"text": "<tool_call>{broken"}}))["data"]["observation"]["info"]["action_error"]
    expected, actions = _in_process(0)
    assert _over_the_wire(server.url, 0, actions) == expected  # a new session after all that


def test_openenv_server_shuts_down_cleanly():
    s = Server()
    with TraceEnvClient(base_url=s.url).sync() as env:
        assert env.reset(seed=0).observation.text.startswith("[system]")
    rc, out = s.stop()
    assert rc == 0 and "stopped" in out and "Traceback" not in out
    with pytest.raises(OSError):
        urllib.request.urlopen(f"{s.url}/health", timeout=2)
