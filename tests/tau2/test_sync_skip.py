"""The engine skips a domain's ``sync`` only when it would change nothing.

A sync runs after a successful call that changed a database; after a read (or a failed,
rolled-back call) the state is the one the last sync left, and running the sync again
changes nothing — checked here on telecom, whose sync carries account facts to the phone.
"""

from __future__ import annotations

import dataclasses

import pytest

from trace_gym.tau2.engine import Tau2Environment

pytestmark = pytest.mark.usefixtures("tau2_data")  # skip cleanly without the τ²-bench data

CALLS = [
    ("get_customer_by_phone", {"phone_number": "555-123-2002"}, False),
    ("get_details_by_id", {"id": "L1001"}, False),
    ("enable_roaming", {"customer_id": "C1001", "line_id": "L1001"}, True),
    ("get_data_usage", {"customer_id": "C1001", "line_id": "L1001"}, False),
    ("suspend_line", {"customer_id": "C1001", "line_id": "L9999", "reason": "x"}, False),  # fails: rolled back
    ("disable_roaming", {"customer_id": "C1001", "line_id": "L1001"}, True),
]


def test_sync_runs_after_changes_only_and_a_skipped_sync_would_change_nothing():
    env = Tau2Environment("telecom")
    env.run_env_function_call("set_user_info", {"name": "John Smith", "phone_number": "555-123-2001"}, "user")
    real_sync = env.spec.sync
    runs = []

    def counting(e):
        runs.append(e.state_version)
        real_sync(e)

    env.spec = dataclasses.replace(env.spec, sync=counting)
    for name, args, changes in CALLS:
        before = len(runs)
        res = env.get_response(name, args)
        assert res.error == (name == "suspend_line"), res.content
        assert len(runs) - before == (1 if changes else 0), name
        hashes = env.hashes()
        real_sync(env)  # what the skipped (or the last) sync would have done: nothing
        assert env.hashes() == hashes, name
    assert env.user_db["surroundings"]["roaming_allowed"] is False  # the last write was carried to the phone


def test_a_new_database_state_is_synced_again():
    env = Tau2Environment("telecom")
    env.run_env_function_call("set_user_info", {"name": "John Smith", "phone_number": "555-123-2001"}, "user")
    env.get_response("enable_roaming", {"customer_id": "C1001", "line_id": "L1001"})
    assert env.user_db["surroundings"]["roaming_allowed"] is True
