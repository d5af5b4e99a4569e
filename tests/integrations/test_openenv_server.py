"""``trace-gym serve ENV_ID``: the real server on 127.0.0.1, OpenEnv's own client class talking to it."""

from __future__ import annotations

import json
import sys
import threading
import urllib.request

import pytest

from tests.extras import need  # noqa: E402

need("openenv")

from tests.integrations.env_server import ENV, start_server  # noqa: E402
from tests.integrations.env_server import in_process as _in_process  # noqa: E402
from trace_gym.integrations.openenv import TraceAction, TraceEnvClient  # noqa: E402

pytestmark = pytest.mark.usefixtures("tau2_data")


@pytest.fixture(scope="module")
def server():
    s = start_server("--max-sessions", "16")
    try:
        yield s
    finally:
        s.stop()


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
    s = start_server()
    with TraceEnvClient(base_url=s.url).sync() as env:
        assert env.reset(seed=0).observation.text.startswith("[system]")
    rc, out = s.stop()
    assert rc == 0 and "stopped" in out and "Traceback" not in out
    with pytest.raises(OSError):
        urllib.request.urlopen(f"{s.url}/health", timeout=2)


def _serve_load():
    import importlib.util

    from tests.integrations.env_server import ROOT

    spec = importlib.util.spec_from_file_location("serve_load", ROOT / "benchmarks" / "serve_load.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it runs
    spec.loader.exec_module(module)
    return module


def test_the_load_benchmark_bounded_loses_and_mixes_nothing():
    """``benchmarks/serve_load.py`` at a small size: 16 sessions at once, 12 steps each (hostile actions among
    them), every reply equal to the in-process replay's."""
    bench = _serve_load()
    report = bench.run(ENV, sessions=16, steps=12)
    assert report.ok, report
    assert report.steps == 16 * 12 and report.requests > report.steps and report.latency_ms["p99"] > 0


def test_the_load_benchmark_sees_a_reply_meant_for_another_session(server):
    """The benchmark's check is not vacuous: sessions whose expected replies are swapped all mismatch."""
    import asyncio

    bench = _serve_load()
    plans = [bench.plan_session(ENV, i, 4) for i in range(2)]
    plans[0].expected, plans[1].expected = plans[1].expected, plans[0].expected
    report = bench.Report(ENV, 2, 4)
    asyncio.run(bench.drive(server.ws_url, plans, report))
    assert not report.errors and report.mismatches == len(plans[0].frames) + len(plans[1].frames)


def test_compression_is_offered_only_with_compress(server):
    from websockets.sync.client import connect

    def extensions(url: str) -> str:
        with connect(url, open_timeout=60) as ws:  # the client offers permessage-deflate
            return ws.response.headers.get("Sec-WebSocket-Extensions", "")

    assert extensions(server.ws_url) == ""
    compressed = start_server("--compress")
    try:
        assert "permessage-deflate" in extensions(compressed.ws_url)
        expected, actions = _in_process(0)
        assert _over_the_wire(compressed.url, 0, actions) == expected
    finally:
        rc, out = compressed.stop()
    assert rc == 0, out
