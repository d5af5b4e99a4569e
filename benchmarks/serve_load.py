"""The env server under load: many concurrent sessions on loopback, every reply checked against the env in process.

Starts ``trace-gym serve ENV --max-sessions N`` (a child process on 127.0.0.1), opens N WebSocket
sessions at once from one asyncio client, and has each send a fixed number of steps.  Session
``i`` plays episodes of seeds ``i * 1000 + k``: the env's reference actions (when it offers
them) with a seeded hostile action (:func:`trace_gym.testing.seeded_hostile_action`) after every
second one, then plain filler until the episode ends; an episode that ends is followed by a reset
with the next seed.  An action the wire refuses (one holding a lone surrogate) must be answered
with an error and step nothing.

Before the timed run every session's requests are played in process (a fresh env per session)
and each reply's digest kept: observation text, reward, done and ``info`` as JSON.  Every reply
over the wire must have the same digest — a reply lost, a step of one session answered in
another, a malformed action that changed state all show as mismatches.

Prints: sessions, steps per session, requests (steps and resets), the timed run's wall seconds,
throughput (requests/s and steps/s), step latency (send to reply, milliseconds: p50, p90, p99,
max), CPU milliseconds per request of the env alone in process (the same requests, one thread),
of the server process and of the client (wall figures suffer on a busy machine, CPU time much
less), mismatches and errors.  Exit status 1 when any reply
mismatches or a session fails.

Usage::

    python benchmarks/serve_load.py [--env ID] [--sessions 64] [--steps 50] [--compress] [--json]

Client and server share the machine: on a machine with few cores the client's own work (JSON,
digests) is part of what is measured.  Run it on an otherwise idle machine and say how busy it was.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import os
import platform
import random
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import gymnasium as gym

import trace_gym  # noqa: F401  (registers the ids)
from trace_gym.testing import seeded_hostile_action

# The openenv extra (websockets, the server) is imported where it is used: the command line parses without it.

FILLER = "Okay."
MAX_HOSTILE_SIZE = 300
REFUSED = "refused"  # the digest of a request the wire must refuse with an error


@dataclass
class Report:
    env_id: str
    sessions: int
    steps_per_session: int
    requests: int = 0
    steps: int = 0
    wall_s: float = 0.0
    requests_per_s: float = 0.0
    steps_per_s: float = 0.0
    latency_ms: dict[str, float] = field(default_factory=dict)
    cpu_ms_per_request: dict[str, float] = field(default_factory=dict)  # the env in process, the server, the client
    mismatches: int = 0
    errors: list[str] = field(default_factory=list)
    cpu_count: int = 0
    load_before: list[float] = field(default_factory=list)
    compressed: bool = False

    @property
    def ok(self) -> bool:
        return self.mismatches == 0 and not self.errors and self.steps == self.sessions * self.steps_per_session


def digest(text: str, reward: Any, done: bool, info: Any) -> str:
    blob = json.dumps([text, reward, bool(done), info], sort_keys=True, ensure_ascii=True)
    return hashlib.sha1(blob.encode()).hexdigest()


def _episode_actions(env: Any, info: dict[str, Any], rng: random.Random) -> list[str]:
    tools = [t["function"]["name"] for t in info.get("tools", [])]
    reference = getattr(env.unwrapped, "reference_actions", None)
    out: list[str] = []
    for k, action in enumerate(reference() if callable(reference) else []):
        out.append(action)
        if k % 2 == 1:
            out.append(seeded_hostile_action(rng, tools, MAX_HOSTILE_SIZE)[1])
    return out


def _refused_on_the_wire(action: str) -> bool:
    try:
        action.encode("utf-8")
        return False
    except UnicodeEncodeError:  # a lone surrogate
        return True


@dataclass
class Plan:
    frames: list[str]  # what the session sends, in order
    expected: list[str]  # the digest of each reply
    env_cpu_s: float  # CPU seconds the env took for them in process (resets and steps)


def plan_session(env_id: str, session: int, steps: int) -> Plan:
    """What session ``session`` sends and the digest of each reply, played in process."""
    from trace_gym.integrations.openenv import json_safe

    env = gym.make(env_id, disable_env_checker=True)
    rng = random.Random(f"serve_load:{env_id}:{session}")
    frames, expected, sent, k, env_cpu_s = [], [], 0, 0, 0.0
    while sent < steps:
        seed = session * 1000 + k
        k += 1
        t0 = time.process_time()
        obs, info = env.reset(seed=seed)
        env_cpu_s += time.process_time() - t0
        frames.append(json.dumps({"type": "reset", "data": {"seed": seed}}))
        expected.append(digest(obs, None, False, json_safe(info)))
        actions = _episode_actions(env, info, rng)
        done = False
        while sent < steps and not done:
            action = actions.pop(0) if actions else FILLER
            frames.append(json.dumps({"type": "step", "data": {"text": action}}))
            sent += 1
            if _refused_on_the_wire(action):
                expected.append(REFUSED)
                continue
            t0 = time.process_time()
            obs, reward, terminated, truncated, info = env.step(action)
            env_cpu_s += time.process_time() - t0
            done = bool(terminated or truncated)
            expected.append(digest(obs, float(reward), done, json_safe(info)))
    env.close()
    return Plan(frames, expected, env_cpu_s)


async def _session(url: str, frames: list[str], expected: list[str], start: asyncio.Event,
                   latencies: list[float]) -> tuple[int, int]:
    """Send ``frames`` in order once ``start`` is set; ``(mismatches, steps sent)``."""
    from websockets.asyncio.client import connect

    mismatches = steps = 0
    async with connect(url, max_size=None, open_timeout=60, ping_interval=None) as ws:
        await start.wait()
        for frame, want in zip(frames, expected, strict=True):
            is_step = frame.startswith('{"type": "step"')
            t0 = time.perf_counter()
            await ws.send(frame)
            raw = await ws.recv()
            if is_step:
                latencies.append(time.perf_counter() - t0)
                steps += 1
            reply = json.loads(raw)
            if reply["type"] == "error":
                got = REFUSED if reply["data"].get("code") == "VALIDATION_ERROR" else f"error: {reply['data']}"
            else:
                data = reply["data"]
                got = digest(data["observation"]["text"], data["reward"], data["done"], data["observation"]["info"])
            mismatches += got != want
    return mismatches, steps


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user and system) process ``pid`` has used, from /proc (NaN where there is none)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return math.nan


async def drive(url: str, plans: list[Plan], report: Report, server_pid: int | None = None) -> None:
    """Play every plan at once against the server at ``url``; fills ``report``'s counts and timings (with the
    server's CPU time when ``server_pid`` is given)."""
    start = asyncio.Event()
    latencies: list[float] = []
    tasks = [asyncio.create_task(_session(url, p.frames, p.expected, start, latencies)) for p in plans]
    await asyncio.sleep(0.5)  # every session connects (and its env is built) before the clock starts
    server0 = process_cpu_s(server_pid) if server_pid else math.nan
    t0, c0 = time.perf_counter(), time.process_time()
    start.set()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    report.wall_s = time.perf_counter() - t0
    client_cpu = time.process_time() - c0
    server_cpu = process_cpu_s(server_pid) - server0 if server_pid else math.nan
    for r in results:
        if isinstance(r, BaseException):
            report.errors.append(f"{type(r).__name__}: {r}")
        else:
            report.mismatches += r[0]
            report.steps += r[1]
    report.requests = sum(len(p.frames) for p in plans)
    report.requests_per_s = report.requests / report.wall_s
    report.steps_per_s = report.steps / report.wall_s
    report.cpu_ms_per_request.update(server=1000 * server_cpu / report.requests,
                                     client=1000 * client_cpu / report.requests)
    if latencies:
        report.latency_ms = {name: 1000 * _percentile(latencies, q) for name, q in
                             (("p50", 50), ("p90", 90), ("p99", 99), ("max", 100))}


def run(env_id: str, sessions: int, steps: int, server_args: list[str] | None = None) -> Report:
    from trace_gym.integrations.openenv_server import ServerProcess

    report = Report(env_id, sessions, steps, cpu_count=os.cpu_count() or 0, load_before=list(os.getloadavg()),
                    compressed="--compress" in (server_args or []))
    plans = [plan_session(env_id, i, steps) for i in range(sessions)]
    report.cpu_ms_per_request["env"] = 1000 * sum(p.env_cpu_s for p in plans) / sum(len(p.frames) for p in plans)
    server = ServerProcess(env_id, "--max-sessions", str(sessions), *(server_args or []))
    try:
        asyncio.run(drive(server.ws_url, plans, report, server.proc.pid))
    finally:
        rc, out = server.stop()
    if rc != 0 or "Traceback" in out:
        report.errors.append(f"server exited {rc}: {out[-2000:]}")
    return report


def _text(r: Report) -> str:
    lat, cpu = r.latency_ms, r.cpu_ms_per_request
    return "\n".join([
        f"# {platform.python_implementation()} {platform.python_version()} on {platform.machine()}, "
        f"{r.cpu_count} CPUs, load average before {r.load_before[0]:.2f}",
        f"{r.env_id}: {r.sessions} concurrent sessions x {r.steps_per_session} steps on loopback"
        f"{' (compressed)' if r.compressed else ''}",
        f"requests        {r.requests} ({r.steps} steps, {r.requests - r.steps} resets) in {r.wall_s:.2f} s",
        f"throughput      {r.requests_per_s:,.0f} requests/s, {r.steps_per_s:,.0f} steps/s",
        f"step latency    p50 {lat.get('p50', math.nan):.1f} ms, p90 {lat.get('p90', math.nan):.1f} ms, "
        f"p99 {lat.get('p99', math.nan):.1f} ms, max {lat.get('max', math.nan):.1f} ms",
        f"CPU per request {cpu.get('env', math.nan):.2f} ms the env alone in process, "
        f"{cpu.get('server', math.nan):.2f} ms the server, {cpu.get('client', math.nan):.2f} ms the client",
        f"replies         {r.mismatches} differ from the in-process replay; {len(r.errors)} session errors",
        *r.errors[:5],
    ])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--env", default="trace/cap-refund-policy-v0", help="env id (default trace/cap-refund-policy-v0)")
    ap.add_argument("--sessions", type=int, default=64, help="concurrent sessions (default 64)")
    ap.add_argument("--steps", type=int, default=50, help="steps each session sends (default 50)")
    ap.add_argument("--compress", action="store_true", help="serve with --compress (WebSocket compression)")
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    a = ap.parse_args(argv)
    if a.sessions < 1 or a.steps < 1:
        ap.error("--sessions and --steps must be >= 1")
    report = run(a.env, a.sessions, a.steps, ["--compress"] if a.compress else [])
    print(json.dumps({**asdict(report), "ok": report.ok}, indent=2) if a.json else _text(report))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
