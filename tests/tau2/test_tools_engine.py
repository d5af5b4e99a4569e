"""Unit tests of the τ²-bench tool engine: bad input, rollback, copy-on-write state and hashing."""

from __future__ import annotations

import ast
import json

import pytest

from tests.corpora import corpus_dir
from trace_gym.tau2.domain_spec import load_domain
from trace_gym.tau2.domains import _common
from trace_gym.tau2.engine import Tau2Environment
from trace_gym.tau2.hashing import canonical_sha256, tau2_hash

README_INITIAL = {
    "mock": ("107f83a70b7bf4f616e283b0b0b8451346fe7681173398d4498a1ec15c5fdfc6",
             "8729effbe2b2e1c7f4310be2c87e6c2d314db0fb5ff4b4444bb4df2a83c1d354"),
    "airline": ("124e39a664b56402bcd09cb8a6a9cece6acb8462337c969799d5658e3250f263",
                "71f1c9bd74a2c0f53e4556f9dac9092b2b4d95758270c083ce36016f64ffa5d4"),
    "retail": ("b25c9cb211f5efcaee5dd646054a73c4a9f43f4f5acc32c10713cd9f9ac20e9c",
               "3ca5bd70e621602e23d909c87f26224a1a486e75955d8a6da53721ec224b23dc"),
}


pytestmark = pytest.mark.usefixtures("tau2_data")  # skip cleanly without the τ²-bench data


def _full_hashes(env: Tau2Environment) -> dict:
    """Hashes computed from scratch (no caches) from the exported DBs."""
    db, udb = env.canonical_db(), env.canonical_user_db()
    return {
        "db_hash": tau2_hash(db),
        "user_db_hash": tau2_hash(udb) if udb is not None else None,
        "db_canonical_sha256": canonical_sha256(db),
        "user_db_canonical_sha256": canonical_sha256(udb) if udb is not None else None,
    }


@pytest.mark.parametrize("domain", ["mock", "airline", "retail"])
def test_initial_hashes_match_readme(domain):
    env = Tau2Environment(domain)
    h = env.hashes()
    assert (h["db_hash"], h["db_canonical_sha256"]) == README_INITIAL[domain]
    assert h == _full_hashes(env)


def test_mock_task_initial_states_match_recorded_hashes():
    recorded = json.loads((corpus_dir("tau2") / "initial_hashes.json").read_text())
    from trace_gym.tau2.data import load_tasks

    tasks = {t["id"]: t for t in load_tasks("mock")}
    states = recorded["task_initial_states"]["mock"]
    assert states
    for task_id, want in states.items():
        env = Tau2Environment("mock")
        st = tasks[task_id]["initial_state"]
        env.set_state(st.get("initialization_data"), st.get("initialization_actions"), st.get("message_history") or [])
        got = env.hashes()
        assert {k: got[k] for k in got} == {k: want[k] for k in got}, task_id
        assert (env.user_db is env.db) == want["user_db_is_agent_db"], task_id


# ---------------------------------------------------------------- bad input


BAD_CALLS = [
    ("airline", "refund_payment", {"reservation_id": "4WQ150"}, "Error: Tool 'refund_payment' not found."),
    ("airline", "get_user_details", {}, "Error: AirlineTools.get_user_details() missing 1 required positional argument: 'user_id'"),
    ("airline", "get_user_details", {"user_id": "mia_li_3668", "x": 1},
     "Error: AirlineTools.get_user_details() got an unexpected keyword argument 'x'"),
    ("airline", "send_certificate", {"user_id": "mia_li_3668", "amount": "lots"}, "Error: 1 validation error for Certificate"),
    ("airline", "cancel_reservation", {"reservation_id": ["4WQ150"]}, "Error: unhashable type: 'list'"),
    ("airline", "update_reservation_baggages",
     {"reservation_id": "4WQ150", "total_baggages": 3, "nonfree_baggages": "1", "payment_id": "x"},
     "Error: unsupported operand type(s) for -: 'str' and 'int'"),
    ("retail", "find_user_id_by_email", {"email": 7}, "Error: 'int' object has no attribute 'lower'"),
    ("retail", "modify_user_address",
     {"user_id": "nope", "address1": "a", "address2": "b", "city": "c", "state": "d", "country": "e", "zip": "f"},
     "Error: User not found"),
    ("retail", "calculate", {"expression": "2 % 3"}, "Error: Invalid characters in expression"),
    ("retail", "calculate", {"expression": "2 ** 9999999"}, "Error: int too large to convert to float"),
    ("mock", "create_task", {"user_id": "user_1", "title": 5}, "Error: 1 validation error for Task"),
    ("mock", "dismiss_notification", {"notification_id": "notif_1"}, "Error: Tool 'dismiss_notification' not found."),
]


@pytest.mark.parametrize("domain,name,args,first_line", BAD_CALLS)
def test_bad_calls_are_error_results_and_change_nothing(domain, name, args, first_line):
    env = Tau2Environment(domain)
    before = env.hashes()
    version = env.state_version
    res = env.get_response(name, args)
    assert res.error is True
    assert res.content.split("\n", 1)[0] == first_line
    assert env.state_version == version
    assert env.hashes() == before == _full_hashes(env)


@pytest.mark.parametrize("arguments", [None, [], "x", 3])
def test_non_object_arguments_are_rejected(arguments):
    env = Tau2Environment("mock")
    before = env.hashes()
    res = env.get_response("get_users", arguments)  # None means "no arguments", as in tau2
    if arguments is None:
        assert not res.error
    else:
        assert res.error and res.content.startswith("Error:")
    assert env.hashes() == before


def test_requestor_rules():
    env = Tau2Environment("mock")
    assert env.get_response("check_notifications", {}, requestor="user").error is False
    assert env.get_response("get_users", {}, requestor="user").content == "Error: Tool 'get_users' not found."
    assert env.get_response("get_users", {}, requestor="robot").content == "Error: Invalid requestor: robot"
    assert Tau2Environment("airline").get_response("get_users", {}, requestor="user").content == (
        "Error: User tools not available"
    )
    solo = Tau2Environment("mock", solo_mode=True)
    assert solo.get_response("check_notifications", {}).error is False  # user tool called by the agent
    assert solo.get_response("check_notifications", {}, requestor="user").content == (
        "Error: User tool calls are not allowed in solo mode"
    )
    with pytest.raises(ValueError, match="Airline domain does not support solo mode"):
        Tau2Environment("airline", solo_mode=True)


def test_failed_write_after_partial_change_is_rolled_back():
    """Paying twice with one certificate: the first is consumed before the second lookup fails."""
    env = Tau2Environment("airline")
    user = "mia_li_3668"
    before = env.hashes()
    res = env.get_response("book_reservation", {
        "user_id": user, "origin": "PHL", "destination": "LGA", "flight_type": "one_way", "cabin": "economy",
        "flights": [{"flight_number": "HAT001", "date": "2024-05-16"}],
        "passengers": [{"first_name": "Mia", "last_name": "Li", "dob": "1990-04-05"}],
        "payment_methods": [{"payment_id": "certificate_4856383", "amount": 1}, {"payment_id": "certificate_4856383", "amount": 1}],
        "total_baggages": 0, "nonfree_baggages": 0, "insurance": "no",
    })
    assert res.error
    assert env.hashes() == before == _full_hashes(env)
    assert "certificate_4856383" in env.db.users[user]["payment_methods"]
    assert env.db.is_shared("users", user)


# ---------------------------------------------------------------- state model


def test_new_episode_shares_untouched_records():
    """A new episode copies nothing until it writes (its start time is measured by ``benchmarks/tau2_speed.py``)."""
    env = Tau2Environment("airline")
    base = load_domain("airline").db.data
    assert env.db.users is base["users"]  # no copy until something is written
    env.get_response("send_certificate", {"user_id": "mia_li_3668", "amount": 50})
    assert env.db.users is not base["users"]
    assert not env.db.is_shared("users", "mia_li_3668")
    assert "chen_jackson_3290" in base["users"]
    assert env.db.is_shared("users", "chen_jackson_3290")  # untouched record: same object as the base
    assert env.db.reservations is base["reservations"]
    assert "certificate_3221322" not in base["users"]["mia_li_3668"]["payment_methods"]


def test_episodes_are_isolated():
    a, b = Tau2Environment("retail"), Tau2Environment("retail")
    order = "#W1006327"  # a pending order: the cancellation succeeds and writes
    b_before = b.hashes()
    res = a.get_response("cancel_pending_order", {"order_id": order, "reason": "no longer needed"})
    assert not res.error, res.content
    assert a.db.orders[order]["status"] == "cancelled" and b.db.orders[order]["status"] == "pending"
    assert a.hashes() != b_before and b.hashes() == b_before
    assert Tau2Environment("retail").hashes() == b_before


def test_cached_hashes_equal_full_serialisation_after_many_writes():
    env = Tau2Environment("airline")
    env.get_response("send_certificate", {"user_id": "mia_li_3668", "amount": 75})
    env.get_response("cancel_reservation", {"reservation_id": "4WQ150"})
    owner = env.db.reservations["4WQ150"]["user_id"]
    card = next(k for k, m in env.db.users[owner]["payment_methods"].items() if m["source"] != "certificate")
    res = env.get_response("update_reservation_baggages",
                           {"reservation_id": "4WQ150", "total_baggages": "3", "nonfree_baggages": 0, "payment_id": card})
    assert not res.error, res.content
    res = env.get_response("book_reservation", {
        "user_id": "mia_li_3668", "origin": "PHL", "destination": "LGA", "flight_type": "one_way",
        "cabin": "economy", "flights": [{"flight_number": "HAT001", "date": "2024-05-16"}],
        "passengers": [{"first_name": "Mia", "last_name": "Li", "dob": "1990-04-05"}],
        "payment_methods": [{"payment_id": "credit_card_4421486", "amount": 1}],
        "total_baggages": 0, "nonfree_baggages": 0, "insurance": "no",
    })
    assert res.error and "total price is" in res.content
    price = int(res.content.split("total price is ")[1].split(",")[0])
    res = env.get_response("book_reservation", {
        "user_id": "mia_li_3668", "origin": "PHL", "destination": "LGA", "flight_type": "one_way",
        "cabin": "economy", "flights": [{"flight_number": "HAT001", "date": "2024-05-16"}],
        "passengers": [{"first_name": "Mia", "last_name": "Li", "dob": "1990-04-05"}],
        "payment_methods": [{"payment_id": "certificate_4856383", "amount": 100}, {"payment_id": "credit_card_4421486", "amount": price - 100}],
        "total_baggages": 0, "nonfree_baggages": 0, "insurance": "no",
    })
    assert not res.error, res.content
    assert json.loads(res.content)["reservation_id"] == "HATHAT"
    assert "certificate_4856383" not in env.db.users["mia_li_3668"]["payment_methods"]  # removed key
    assert env.hashes() == _full_hashes(env)
    assert env.db.reservations["4WQ150"]["total_baggages"] == "3"  # unvalidated assignment kept as is


def test_calculate_matches_python_and_refuses_huge_powers(monkeypatch):
    env = Tau2Environment("retail")
    assert env.get_response("calculate", {"expression": "  (2 + 3) * 4 / 3"}).content == "6.67"
    assert env.get_response("calculate", {"expression": "1/0"}).content == "Error: division by zero"
    assert env.get_response("calculate", {"expression": "(1"}).content == "Error: '(' was never closed (<string>, line 1)"
    powers = []

    def recorded_pow(a, b):
        powers.append((a, b))
        return a**b

    monkeypatch.setitem(_common._BINOPS, ast.Pow, recorded_pow)
    res = env.get_response("calculate", {"expression": "9**9**9**9"})
    assert res.error and res.content == "Error: int too large to convert to float"
    assert powers == [(9, 9)]  # 9**387420489 is refused from its size, never computed
    assert env.get_response("calculate", {"expression": "2**10"}).content == "1024.0" and powers[-1] == (2, 10)


def test_schemas_and_kinds_come_from_tools_json():
    for domain in ("mock", "airline", "retail"):
        env = Tau2Environment(domain)
        raw = json.loads((env.data.directory / "tools.json").read_text())
        assert env.agent_tool_schemas() == [t["openai_schema"] for t in raw]
        for t in raw:
            assert env.tool_kind(t["name"]) == t["tool_type"]
            assert env.mutates_state(t["name"]) == t["mutates_state"]
    mock = Tau2Environment("mock")
    raw = json.loads((mock.data.directory / "user_tools.json").read_text())
    assert mock.user_tool_schemas() == [t["openai_schema"] for t in raw]
    assert mock.tool_kind("nope") is None and mock.mutates_state("nope") is True


def test_set_state_replay_mismatch_raises():
    env = Tau2Environment("mock")
    history = [
        {"role": "assistant", "tool_calls": [{"id": "c1", "name": "create_task", "arguments": {"user_id": "user_1", "title": "T"}}]},
        {"role": "tool", "id": "c1", "content": "{\"task_id\": \"task_9\"}"},
    ]
    with pytest.raises(ValueError, match="Expected"):
        env.set_state(None, None, history)
    with pytest.raises(ValueError, match="Tool message expected"):
        Tau2Environment("mock").set_state(None, None, history[:1])


def test_env_assertions_and_their_errors():
    env = Tau2Environment("mock")
    assert env.run_env_assertion("assert_task_status", {"task_id": "task_1", "expected_status": "pending"}) is True
    assert env.run_env_assertion("assert_number_of_tasks", {"user_id": "user_1", "expected_number": 2},
                                 assert_value=False) is True
    with pytest.raises(ValueError, match="Task task_2 not found"):
        env.run_env_assertion("assert_task_status", {"task_id": "task_2", "expected_status": "pending"})
    assert env.run_env_assertion("assert_notification_status", {"notification_id": "notif_1", "expected_status": "unread"},
                                 env_type="user") is True
    with pytest.raises(AttributeError):
        env.run_env_function_call("_user", {}, "assistant")


def test_quirk_passengers_not_a_list_of_dicts_are_stored_as_given():
    """tau2 converts passengers only when all elements are dicts; a one-key dict iterates as one passenger."""
    env = Tau2Environment("airline")
    rid = next(k for k, r in env.db.reservations.items() if len(r["passengers"]) == 1)
    res = env.get_response("update_reservation_passengers", {"reservation_id": rid, "passengers": {"a": 1}})
    assert not res.error
    assert json.loads(res.content)["passengers"] == {"a": 1}
    assert env.hashes() == _full_hashes(env)


def test_state_does_not_share_objects_with_call_arguments():
    env = Tau2Environment("airline")
    rid = next(k for k, r in env.db.reservations.items() if len(r["passengers"]) == 1)
    passengers = [{"first_name": "A", "last_name": "B", "dob": "2000-01-01"}]
    env.get_response("update_reservation_passengers", {"reservation_id": rid, "passengers": passengers})
    before = env.hashes()
    passengers[0]["first_name"] = "changed later"
    assert env.db.reservations[rid]["passengers"][0]["first_name"] == "A"
    assert env.hashes() == before == _full_hashes(env)


def test_repeated_cancellation_is_bounded():
    """Each repeat refunds every entry again (tau2 quirk); we stop before the history explodes."""
    env = Tau2Environment("airline")
    rid = "4WQ150"
    sizes = []
    for _ in range(20):
        res = env.get_response("cancel_reservation", {"reservation_id": rid})
        sizes.append(len(env.db.reservations[rid]["payment_history"]))
    assert sizes[:3] == [2, 4, 8]
    assert max(sizes) <= 4096
    assert res.error and "cancelled too many times" in res.content


def test_an_injected_database_is_used_and_shared_without_copies():
    real = load_domain("retail").db.data
    uid = "ivan_santos_6635"
    user = real["users"][uid]
    small = {"users": {uid: user}, "orders": {o: real["orders"][o] for o in user["orders"]},
             "products": real["products"]}
    before = json.dumps(small, sort_keys=True)
    env = Tau2Environment("retail", db=small)
    assert env.base.data["users"].keys() == {uid} and env.canonical_db()["orders"].keys() == set(user["orders"])
    assert json.loads(env.get_response("get_user_details", {"user_id": uid}).content)["user_id"] == uid
    other = next(u for u in real["users"] if u != uid)
    assert env.get_response("get_user_details", {"user_id": other}).content == "Error: User not found"
    # a second environment on the same base: no copy, and each one's writes stay its own
    twin = Tau2Environment("retail", db=env.base)
    assert twin.base is env.base and twin.db.hash("canonical") == env.db.hash("canonical")
    pending = next(o for o in user["orders"] if real["orders"][o]["status"] == "pending")
    res = twin.get_response("cancel_pending_order", {"order_id": pending, "reason": "no longer needed"})
    assert not res.error and twin.canonical_db()["orders"][pending]["status"] == "cancelled"
    assert env.canonical_db()["orders"][pending]["status"] == "pending" == env.base.data["orders"][pending]["status"]
    assert json.dumps(small, sort_keys=True) == before  # the caller's database is never mutated
