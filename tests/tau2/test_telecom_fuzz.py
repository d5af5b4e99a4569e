"""Fuzzed telecom tool calls: never an exception out of ``get_response``; a failed call changes nothing."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from trace_gym.tau2.domain_spec import load_domain
from trace_gym.tau2.engine import Tau2Environment
from trace_gym.tau2.hashing import canonical_sha256

IDS = ["C1001", "C1002", "C1003", "C9999", "L1001", "L1002", "L1003", "L1009", "L0000", "B1001", "B1005", "P1002", "D1004"]
WORDS = ["messaging", "browser", "sms", "storage", "network", "4g_only", "2g_only", "LTE", "internet", "broken", "pin"]

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 5), st.floats(-3, 30, allow_nan=False), st.sampled_from(IDS + WORDS), st.text(max_size=6)
)
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(WORDS + ["apn_name", "mms_port", "mmsc_url"]), inner, max_size=3)), max_leaves=6)


@lru_cache(maxsize=1)
def _schemas() -> dict[str, list[str]]:
    data = load_domain("telecom")
    out = {}
    for t in data.tools + data.user_tools:
        out[t["name"]] = list(t["openai_schema"]["function"]["parameters"].get("properties", {}))
    return out


@st.composite
def calls(draw: st.DrawFn) -> tuple[str, dict[str, Any], str]:
    names = sorted(_schemas())
    name = draw(st.sampled_from(names + ["check_signal", "restart_phone"]))
    params = _schemas().get(name, [])
    keys = draw(st.lists(st.sampled_from(params + ["force", "self"]) if params else st.sampled_from(["force", "self"]), max_size=4, unique=True))
    args = {k: draw(values) for k in keys}
    # Mostly well-formed keys, so the bodies of the tools are reached too.
    if params and draw(st.booleans()):
        args = {k: draw(values) for k in params}
    requestor = draw(st.sampled_from(["user", "assistant", "assistant", "user", "system"]))
    return name, args, requestor


def _fresh(solo: bool) -> Tau2Environment:
    env = Tau2Environment("telecom", solo_mode=solo)
    env.set_state(None, [
        {"env_type": "user", "func_name": "set_user_info", "arguments": {"name": "John Smith", "phone_number": "555-123-2002"}},
        {"env_type": "assistant", "func_name": "set_data_usage", "arguments": {"customer_id": "C1001", "line_id": "L1002", "data_used_gb": 15.1}},
        {"env_type": "user", "func_name": "break_vpn", "arguments": {}},
    ], [])
    return env


@settings(max_examples=120, deadline=None)
@given(st.lists(calls(), min_size=1, max_size=8), st.booleans())
def test_fuzzed_calls_never_raise_and_failures_change_nothing(sequence: list[tuple[str, dict[str, Any], str]], solo: bool) -> None:
    env = _fresh(solo)
    for name, args, requestor in sequence:
        before = (env.hashes(), env.canonical_db(), env.canonical_user_db())
        res = env.get_response(name, args, requestor)
        assert isinstance(res.content, str)
        if res.error:
            assert res.content.startswith("Error: ")
            assert (env.hashes(), env.canonical_db(), env.canonical_user_db()) == before, (name, args, requestor, res)
        else:
            # The (memoised) hashes always describe the state as it is.
            assert env.hashes()["db_canonical_sha256"] == canonical_sha256(env.canonical_db())
            assert env.hashes()["user_db_canonical_sha256"] == canonical_sha256(env.canonical_user_db())
