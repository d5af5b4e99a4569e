"""Telecom tools beyond the corpus: bad input, state isolation, sync, solo mode, env functions."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import pytest

from trace_gym.tau2.engine import Tau2Environment

pytestmark = pytest.mark.usefixtures("tau2_data")

HASH_KEYS = ("db_hash", "user_db_hash", "db_canonical_sha256", "user_db_canonical_sha256")


@lru_cache(maxsize=1)
def _tasks() -> dict[str, dict[str, Any]]:
    from trace_gym.tau2.data import load_tasks

    return {t["id"]: t for t in load_tasks("telecom")}


def _env(task_id: str | None = None, solo: bool = False) -> Tau2Environment:
    env = Tau2Environment("telecom", solo_mode=solo)
    if task_id is not None:
        st = _tasks()[task_id]["initial_state"]
        env.set_state(st.get("initialization_data"), st.get("initialization_actions"), st.get("message_history") or [])
    return env


def _task_with(*parts: str) -> str:
    for task_id in _tasks():
        if all(p in task_id for p in parts):
            return task_id
    raise AssertionError(f"no telecom task with {parts}")


def _user(env: Tau2Environment, name: str, **args: Any):
    return env.get_response(name, args, "user")


def _agent(env: Tau2Environment, name: str, **args: Any):
    return env.get_response(name, args, "assistant")


# --------------------------------------------------------------------------- rejected calls change nothing
BAD_CALLS = [
    ("assistant", "refuel_data", {"customer_id": "C1001", "line_id": "L1002", "gb_amount": "2"},
     "Error: '<=' not supported between instances of 'str' and 'int'"),
    ("assistant", "refuel_data", {"customer_id": "C1001", "line_id": "L1002", "gb_amount": None},
     "Error: '<=' not supported between instances of 'NoneType' and 'int'"),
    ("assistant", "refuel_data", {"customer_id": "C1001", "line_id": "L1002", "gb_amount": 0},
     "Error: Refuel amount must be positive"),
    ("assistant", "refuel_data", {"customer_id": "C1001", "line_id": "L1004", "gb_amount": 1.0},
     "Error: Line L1004 not found for customer C1001"),
    ("assistant", "resume_line", {},
     "Error: TelecomTools.resume_line() missing 2 required positional arguments: 'customer_id' and 'line_id'"),
    ("assistant", "suspend_line", {"customer_id": "C1001", "line_id": "L1001", "reason": "x", "force": True},
     "Error: TelecomTools.suspend_line() got an unexpected keyword argument 'force'"),
    ("assistant", "suspend_line", {"customer_id": "C1001", "line_id": "L1003", "reason": "x"},
     "Error: Line must be active to suspend"),
    ("assistant", "get_details_by_id", {"id": 1001}, "Error: 'int' object has no attribute 'startswith'"),
    ("assistant", "get_customer_by_name", {"full_name": 7, "dob": "1985-06-15"},
     "Error: 'int' object has no attribute 'lower'"),
    ("assistant", "get_bills_for_customer", {"customer_id": "C1001", "limit": "3"},
     "Error: slice indices must be integers or None or have an __index__ method"),
    ("assistant", "send_payment_request", {"customer_id": "C1001", "bill_id": "B1004"},
     "Error: Bill B1004 not found for customer C1001"),
    ("assistant", "toggle_data", {}, "Error: Tool 'toggle_data' not found."),
    ("user", "refuel_data", {"customer_id": "C1001", "line_id": "L1002", "gb_amount": 1.0},
     "Error: Tool 'refuel_data' not found."),
    ("robot", "toggle_data", {}, "Error: Invalid requestor: robot"),
    ("user", "set_network_mode_preference", {"mode": 5}, "Error: 'int' object has no attribute 'value'"),
    ("user", "set_network_mode_preference", {"mode": None}, "Error: 'NoneType' object has no attribute 'value'"),
    ("user", "set_apn_settings", {"apn_settings": "internet"}, "Error: 'str' object has no attribute 'apn_name'"),
    ("user", "grant_app_permission", {"app_name": "messaging", "permission": 3},
     "Error: 'int' object has no attribute 'lower'"),
    ("user", "grant_app_permission", {"app_name": ["messaging"], "permission": "sms"}, "Error: unhashable type: 'list'"),
    ("user", "toggle_wifi", {"now": True}, "Error: TelecomUserTools.toggle_wifi() got an unexpected keyword argument 'now'"),
]


@pytest.mark.parametrize(("requestor", "name", "args", "text"), BAD_CALLS, ids=[f"{c[1]}-{i}" for i, c in enumerate(BAD_CALLS)])
def test_bad_call_is_an_error_and_changes_nothing(requestor: str, name: str, args: dict, text: str) -> None:
    env = _env(_task_with("[mobile_data_issue]", "data_usage_exceeded"))
    before, db, user_db = env.hashes(), env.canonical_db(), env.canonical_user_db()
    res = env.get_response(name, args, requestor)
    assert res.error and res.content == text
    assert env.hashes() == before
    assert env.canonical_db() == db and env.canonical_user_db() == user_db


def test_apn_validation_counts_every_bad_field() -> None:
    env = _env()
    before = env.hashes()
    res = _user(env, "set_apn_settings", apn_settings={"apn_name": "fast", "mms_port": "x", "proxy": "1.2.3.4"})
    assert res.error
    first, *rest = res.content.split("\n")
    assert first == "Error: 3 validation errors for APNSettings"
    assert rest[0] == "apn_name" and "mms_port" in rest and "proxy" in rest
    assert env.hashes() == before


def test_apn_settings_are_coerced_like_the_model() -> None:
    env = _env()
    res = _user(env, "set_apn_settings", apn_settings={"apn_name": "internet", "mms_port": "8080", "reset_at_reboot": "yes"})
    assert not res.error
    apn = env.canonical_user_db()["device"]["active_apn_settings"]
    assert apn == {
        "apn_name": "internet", "reset_at_reboot": True, "mms_apn": "mms",
        "mmsc_url": "http://mms.carrier.com/mms/wapenc", "mms_proxy": None, "mms_port": 8080,
    }
    # The pending reset restores the defaults at the next reboot.
    assert _user(env, "reboot_device").content.startswith("Resetting APN settings...\nRestarting network services...")
    assert env.canonical_user_db()["device"]["active_apn_settings"]["mms_port"] is None


def test_arguments_must_be_an_object() -> None:
    env = _env()
    before = env.hashes()
    res = env.get_response("toggle_data", ["x"], "user")  # type: ignore[arg-type]
    assert res.error and env.hashes() == before


# --------------------------------------------------------------------------- VPN state is per environment
def test_break_vpn_does_not_leak_into_other_environments() -> None:
    broken = _env(_task_with("bad_vpn"))
    assert "<PerformanceLevel.POOR: 'poor'>" in _user(broken, "check_vpn_status").content
    # Within the episode, reconnecting uses the degraded profile (τ²'s aliasing) ...
    _user(broken, "disconnect_vpn")
    _user(broken, "connect_vpn")
    assert "<PerformanceLevel.POOR: 'poor'>" in _user(broken, "check_vpn_status").content
    # ... but a fresh environment connects to an excellent VPN at full speed.
    fresh = _env()
    _user(fresh, "connect_vpn")
    assert _user(fresh, "check_vpn_status").content == (
        "VPN is ON and connected. Details: {'server_address': '192.168.1.1', 'protocol': 'OpenVPN', "
        "'server_performance': <PerformanceLevel.EXCELLENT: 'excellent'>}"
    )
    assert _user(fresh, "run_speed_test").content == "Speed Test Result: 220.00 Mbps (Excellent). Connection is very fast."


def test_speed_test_reflects_data_saver_and_network_mode() -> None:
    env = _env()
    _user(env, "toggle_data_saver_mode")
    assert _user(env, "run_speed_test").content.startswith("Speed Test Result: 44.00 Mbps (Good).")
    _user(env, "set_network_mode_preference", mode="3g_only")
    assert _user(env, "check_network_status").content.splitlines()[3:5] == ["Cellular Signal: fair", "Cellular Network Type: 3G"]
    assert _user(env, "run_speed_test").content.startswith("Speed Test Result: 0.30 Mbps (Very Poor).")


# --------------------------------------------------------------------------- sync between phone and account
def _overdue_bill_of_user(env: Tau2Environment) -> dict[str, Any]:
    db = env.canonical_db()
    phone = env.canonical_user_db()["surroundings"]["phone_number"]
    line = next(ln for ln in db["lines"] if ln["phone_number"] == phone)
    owner = next(c for c in db["customers"] if line["line_id"] in c["line_ids"])
    return next(b for b in db["bills"] if b["bill_id"] in owner["bill_ids"] and b["status"] == "Overdue")


def test_payment_request_round_trip_through_sync() -> None:
    env = _env(_task_with("overdue_bill_suspension"))
    overdue = _overdue_bill_of_user(env)
    customer = overdue["customer_id"]
    assert _user(env, "check_payment_request").content == "No payment request has been made."
    assert not _agent(env, "send_payment_request", customer_id=customer, bill_id=overdue["bill_id"]).error
    amount = overdue["total_due"]
    assert _user(env, "check_payment_request").content == (
        f"You have a payment request for bill {overdue['bill_id']} of {amount} USD."
    )
    paid = _user(env, "make_payment")
    assert paid.content == f"Payment of {amount} USD has been made for bill {overdue['bill_id']}."
    bill = next(b for b in env.canonical_db()["bills"] if b["bill_id"] == overdue["bill_id"])
    assert bill["status"] == "Paid"
    assert env.canonical_user_db()["surroundings"]["payment_request"] is None
    assert env.run_env_assertion("assert_no_overdue_bill", {"overdue_bill_id": overdue["bill_id"]}, "assistant", True)


def test_make_tool_call_does_not_sync_but_get_response_does() -> None:
    env = _env(_task_with("overdue_bill_suspension"))
    overdue = _overdue_bill_of_user(env)
    env.make_tool_call("send_payment_request", {"customer_id": overdue["customer_id"], "bill_id": overdue["bill_id"]})
    assert env.canonical_user_db()["surroundings"]["payment_request"] is None  # not propagated yet
    env.sync_tools()
    assert env.canonical_user_db()["surroundings"]["payment_request"]["bill_id"] == overdue["bill_id"]


def test_refuel_and_roaming_reach_the_phone() -> None:
    task_id = _task_with("[mobile_data_issue]", "data_usage_exceeded")
    env = _env(task_id)
    assert env.canonical_user_db()["surroundings"]["mobile_data_usage_exceeded"] is True
    phone = env.canonical_user_db()["surroundings"]["phone_number"]
    line = next(ln for ln in env.canonical_db()["lines"] if ln["phone_number"] == phone)
    customer = next(c for c in env.canonical_db()["customers"] if line["line_id"] in c["line_ids"])
    res = _agent(env, "refuel_data", customer_id=customer["customer_id"], line_id=line["line_id"], gb_amount=2.0)
    assert not res.error and '"new_data_refueling_gb": "2.0"' in res.content
    assert env.canonical_user_db()["surroundings"]["mobile_data_usage_exceeded"] is False
    assert env.run_env_assertion(
        "assert_data_refueling_amount",
        {"customer_id": customer["customer_id"], "line_id": line["line_id"], "expected_amount": 2.0},
        "assistant",
    )
    roaming = line["roaming_enabled"]
    _agent(env, "disable_roaming" if roaming else "enable_roaming", customer_id=customer["customer_id"], line_id=line["line_id"])
    assert env.canonical_user_db()["surroundings"]["roaming_allowed"] is (not roaming)


# --------------------------------------------------------------------------- solo mode and env functions
def test_solo_mode_routes_user_tools_through_the_agent() -> None:
    env = _env(_task_with("airplane_mode_on"), solo=True)
    before = env.hashes()
    res = _user(env, "toggle_airplane_mode")
    assert res.error and res.content == "Error: User tool calls are not allowed in solo mode"
    assert env.hashes() == before
    res = _agent(env, "toggle_airplane_mode")
    assert not res.error and res.content.startswith("Airplane Mode is now OFF.")
    assert env.run_env_assertion("assert_airplane_mode_status", {"expected_status": False}, "user", True)


def test_env_functions_and_their_errors() -> None:
    env = _env()
    with pytest.raises(AttributeError, match="no attribute 'no_such_function'"):
        env.run_env_function_call("no_such_function", {}, "user")
    with pytest.raises(AttributeError):
        env.run_env_function_call("_network_search", {}, "user")
    with pytest.raises(ValueError, match="is not a valid NetworkStatus"):
        env.run_env_assertion("assert_service_status", {"expected_status": "online"}, "user")
    with pytest.raises(ValueError, match="returned <class 'str'> instead of bool"):
        env.run_env_assertion("check_sim_status", {}, "user")
    assert env.run_env_assertion("assert_service_status", {"expected_status": "connected"}, "user") is True
    assert env.run_env_assertion("assert_internet_speed", {"expected_speed": 200, "expected_desc": "excellent"}, "user")
    assert env.run_env_assertion("assert_can_send_mms", {"expected_status": True}, "user")
    env.run_env_function_call("break_apn_mms_setting", {}, "user")
    assert env.run_env_assertion("assert_can_send_mms", {"expected_status": False}, "user")


def test_overdue_bill_setup_creates_the_bill_and_suspends_the_line() -> None:
    env = _env()
    msg = env.run_env_function_call(
        "suspend_line_for_overdue_bill",
        {"customer_id": "C1001", "line_id": "L1001", "new_bill_id": "B9001", "contract_ended": True},
    )
    assert msg == "Line L1001 suspended for unpaid bill B9001. Contract ended: True"
    db = env.canonical_db()
    bill = db["bills"][-1]
    assert bill == {
        "bill_id": "B9001", "customer_id": "C1001", "period_start": "2025-01-01", "period_end": "2025-01-31",
        "issue_date": "2025-01-01", "total_due": 40.0, "due_date": "2025-01-15",
        "line_items": [{"description": "Charge for line L1001", "amount": 40.0, "date": "2025-02-25", "item_type": "Charge"}],
        "status": "Overdue",
    }
    line = db["lines"][0]
    assert (line["status"], line["suspension_start_date"], line["contract_end_date"]) == ("Suspended", "2025-02-25", "2025-01-31")
    assert env.run_env_assertion("assert_overdue_bill_exists", {"customer_id": "C1001", "overdue_bill_id": "B9001"})
    with pytest.raises(ValueError, match="Customer already has an overdue bill"):
        env.run_env_function_call(
            "suspend_line_for_overdue_bill",
            {"customer_id": "C1001", "line_id": "L1002", "new_bill_id": "B9002", "contract_ended": False},
        )
    assert env.canonical_db() == db


def test_tool_lists_follow_the_data_files() -> None:
    env = _env()
    agent = [s["function"]["name"] for s in env.agent_tool_schemas()]
    user = [s["function"]["name"] for s in env.user_tool_schemas()]
    assert len(agent) == 13 and "refuel_data" in agent and env.tool_kind("transfer_to_human_agents") == "generic"
    assert len(user) == 30 and "make_payment" in user and env.mutates_state("toggle_data")
    assert not env.mutates_state("check_status_bar")


def test_every_task_initial_state_applies() -> None:
    """Each of the 114 telecom tasks' initialization (data and actions) runs on a fresh engine (how long this takes
    is ``reset`` in ``benchmarks/tau2_speed.py``)."""
    fresh = _env().hashes()
    changed = [task_id for task_id in _tasks() if _env(task_id).hashes() != fresh]
    assert len(_tasks()) == 114 and len(changed) == 114, sorted(set(_tasks()) - set(changed))  # every task sets some state
