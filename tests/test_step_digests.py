"""The step and reset fast paths change nothing: whole episodes, ``info`` included, are pinned.

Each episode plays a fixed mix of actions — valid and invalid tool calls (unknown tool,
wrong types, missing and extra arguments), messages to the user and malformed actions —
on every τ²-bench environment and every capability environment on a τ²-bench domain,
and digests every observation, reward, flag and ``info`` (messages, tool schemas, reward
components).  The digests were computed with the code as it was before the step speed-ups;
they fail if the shipped data, a spec or the engine's outputs change on
purpose: then recompute them (``python -m tests.test_step_digests``) and say why in the commit.
"""

from __future__ import annotations

import hashlib
import json

import gymnasium as gym
import pytest

import trace_gym  # noqa: F401

TAU2_SCRIPTS = {
    "airline": [
        ("get_user_details", {"user_id": "mia_li_3668"}),
        ("get_reservation_details", {"reservation_id": "NO6JO3"}),
        ("search_direct_flight", {"origin": "JFK", "destination": "SFO", "date": "2024-05-16"}),
        ("update_reservation_baggages", {"reservation_id": "NO6JO3", "total_baggages": 2, "nonfree_baggages": 0,
                                         "payment_id": "credit_card_4421486"}),
        ("send_certificate", {"user_id": "mia_li_3668", "amount": 50}),
        ("get_user_details", {"user_id": 7}),
        ("calculate", {"expression": "2 * (3 + 4)"}),
    ],
    "retail": [
        ("find_user_id_by_email", {"email": "yusuf.rossi7301@example.com"}),
        ("get_order_details", {"order_id": "#W2378156"}),
        ("modify_user_address", {"user_id": "yusuf_rossi_9620", "address1": "1 Main St", "address2": "",
                                 "city": "Austin", "state": "TX", "country": "USA", "zip": "78701"}),
        ("cancel_pending_order", {"order_id": "#W2378156", "reason": "no longer needed"}),
        ("list_all_product_types", {}),
        ("get_product_details", {"product_id": ["x"]}),
    ],
    "telecom": [
        ("get_customer_by_phone", {"phone_number": "555-123-2002"}),
        ("get_details_by_id", {"id": "L1001"}),
        ("enable_roaming", {"customer_id": "C1001", "line_id": "L1001"}),
        ("suspend_line", {"customer_id": "C1001", "line_id": "L9999", "reason": "x"}),
    ],
    "mock": [
        ("get_users", {}),
        ("create_task", {"user_id": "user_1", "title": "Bench"}),
        ("update_task_status", {"task_id": "task_1", "status": "completed"}),
        ("create_task", {"user_id": "user_1"}),
    ],
}
# actions every episode also plays (after its own): failures of every kind, then messages
COMMON = [
    json.dumps({"name": "no_such_tool", "arguments": {}}),
    json.dumps({"name": "calculate", "arguments": "not an object"}),
    '{"name": "broken", "arguments": {',
    "Could you tell me your user id, please?",
    "",
    "Thanks, that is all. ###STOP###",
]


def _tau2_ids() -> list[str]:
    return sorted(i for i in gym.registry if i.startswith("trace/tau2-"))


def _cap_ids() -> list[str]:
    return sorted(i for i in gym.registry if i.startswith("trace/cap-") and not i.startswith("trace/cap-ts-"))


def ALL_IDS() -> list[str]:  # noqa: N802
    return _tau2_ids() + _cap_ids()


def _digest(x) -> str:
    return hashlib.sha256(json.dumps(x, sort_keys=True, ensure_ascii=False, default=repr).encode()).hexdigest()[:16]


def _actions(env_id: str, env) -> list[str]:
    if env_id.startswith("trace/tau2-"):
        domain = env_id.split("-")[1]
        calls = [json.dumps({"name": n, "arguments": a}) for n, a in TAU2_SCRIPTS[domain]]
        return calls + COMMON
    acts = list(env.read_only_actions()) + list(env.reference_actions())
    names = [n for n in env.tools.names]
    wrong = [json.dumps({"name": n, "arguments": {"unexpected": 1}}) for n in names[:3]]
    wrong += [json.dumps({"name": n, "arguments": {k: 12345 for k in (env.tools[n].parameters.get("properties") or {})}})
              for n in names[:3]]
    return wrong + acts[:1] + COMMON[:4] + acts + COMMON[4:]


def episode_digest(env_id: str, seed: int) -> str:
    kw = {"max_steps": 60}
    env = gym.make(env_id, **kw).unwrapped
    obs, info = env.reset(seed=seed)
    trace = [obs, info]
    for a in _actions(env_id, env):
        o, r, term, trunc, inf = env.step(a)
        trace.append([o, r, term, trunc, inf])
        if term or trunc:
            break
    trace.append(env.state_fingerprint())
    trace.append(env.transcript())
    env.close()
    return _digest(trace)


PINNED: dict[str, list[str]] = {
    'trace/tau2-airline-v0': ['2a3fef8d6a01cf18', '4b22e08fec171c03', '1871f59c58cf2305'],
    'trace/tau2-mock-v0': ['e83d2ae855b40729', '9e17d001b2ff3e15', 'e83d2ae855b40729'],
    'trace/tau2-retail-v0': ['6a0f3ea4dedda4da', 'c2b9f3585a3d651d', '8a3449b846a0a4c3'],
    'trace/tau2-telecom-v0': ['66feaf0135bdc8a2', '308162c52de9e24a', 'e27c6f163579f9fd'],
    'trace/cap-flight-selection-v0': ['02652977d1124f58', '42df3dca26b5c963', '913aaf39dfffc6ff'],
    'trace/cap-multi-step-completion-v0': ['d0e92fce00083e31', '949acd8ce0abed36', '31a1e486dd1cd986'],
    'trace/cap-precondition-verification-v0': ['558d3a943029dc29', '51a243a3b9ee64e9', '035c002af2d0671d'],
    'trace/cap-refund-policy-v0': ['f3b0cd8c62c13db1', '24ae18c91a35f451', 'a9237891c4d2da78'],
    'trace/cap-structured-selection-v0': ['8cd7c83349ecf539', '83feb8557692d54b', '68df8b5666aa0564'],
    'trace/cap-tool-call-precision-v0': ['a5f509b1366c4ec5', '156cb65accf0295e', '0fce5ae7b8f23931'],
}


@pytest.mark.parametrize("env_id", sorted(PINNED))
def test_episodes_are_unchanged(tau2_data, env_id):
    assert env_id in gym.registry, f"{env_id} is not registered"
    assert [episode_digest(env_id, s) for s in range(3)] == PINNED[env_id]


if __name__ == "__main__":
    for i in ALL_IDS():
        print(f"    {i!r}: {[episode_digest(i, s) for s in range(3)]!r},")
