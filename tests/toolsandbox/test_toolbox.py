"""The ToolSandbox tools over an injected world (:class:`ToolBox`): one implementation, reusable."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trace_gym.core import ToolSet
from trace_gym.toolsandbox.world import World

SELF = {"person_id": "me", "name": "Tomas Haake", "phone_number": "+11233344455", "relationship": "self",
        "is_self": True}
FRIEND = {"person_id": "f1", "name": "Fredrik Thordendal", "phone_number": "+12453344098", "relationship": "friend",
          "is_self": False}


@pytest.fixture(scope="module")
def catalog(root):
    from trace_gym.toolsandbox.catalog import load_catalog

    return load_catalog(root / "tools.json")


def _world(**settings_) -> World:
    row = {"device_id": "d", "cellular": True, "wifi": True, "location_service": True, "low_battery_mode": False,
           "latitude": 37.33, "longitude": -122.03}
    row.update(settings_)
    return World.from_tables({"SETTING": [row], "CONTACT": [SELF, FRIEND]})


def _rows(world: World) -> dict:
    return {db: world.rows(db) for db in ("SETTING", "CONTACT", "MESSAGING", "REMINDER")}


def test_tools_run_on_a_world_of_your_own(catalog) -> None:
    from trace_gym.toolsandbox.toolbox import ToolBox

    world = _world(cellular=False)
    box = ToolBox(world, ["search_contacts", "send_message_with_phone_number", "set_cellular_service_status"],
                  catalog=catalog)
    assert box.names == ["search_contacts", "send_message_with_phone_number", "set_cellular_service_status"]
    assert box.call("search_contacts", {"name": "Fredrik"}).result == [FRIEND]
    sent = box.call("send_message_with_phone_number", {"phone_number": FRIEND["phone_number"], "content": "hi"})
    assert sent.error == "ConnectionError: Cellular service is not enabled" and world.rows("MESSAGING") == []
    assert box.call("set_cellular_service_status", {"on": True}).error is None
    sent = box.call("send_message_with_phone_number", {"phone_number": FRIEND["phone_number"], "content": "hi"})
    (msg,) = world.rows("MESSAGING")
    assert msg["message_id"] == sent.result and msg["recipient_person_id"] == "f1" and msg["sender_person_id"] == "me"
    with pytest.raises(ValueError, match="unknown ToolSandbox tool"):
        ToolBox(world, ["teleport"], catalog=catalog)


def test_toolset_has_the_benchmark_schemas_and_kinds(catalog) -> None:
    from trace_gym.toolsandbox.toolbox import ToolBox

    box = ToolBox(_world(), catalog=catalog)
    tools = box.toolset()
    assert isinstance(tools, ToolSet) and len(tools) == len(box.names) == 33  # end_conversation is the user's
    assert tools.schemas() == box.schemas() and tools.schemas()[0] == dict(box.schemas()[0])
    assert tools["add_contact"].kind == "write" and tools["search_contacts"].kind == "read"
    ok = tools.call("get_wifi_status", {})
    assert (ok.content, ok.error) == ("True", False)
    bad = tools.call("set_wifi_status", {"on": True})
    assert bad.error and bad.content == "Error: ValueError: wifi already enabled"


_junk = st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False) | st.text(max_size=12)


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_a_failed_call_changes_nothing(catalog, data) -> None:
    from trace_gym.toolsandbox.toolbox import ToolBox

    world = _world(low_battery_mode=data.draw(st.booleans()), wifi=data.draw(st.booleans()))
    box = ToolBox(world, catalog=catalog)
    name = data.draw(st.sampled_from([*box.names, "no_such_tool"]))
    params = [p.name for p in catalog.specs[name].params] if name in catalog.specs else ["x"]
    args = data.draw(st.dictionaries(st.sampled_from([*params, "bogus"]), _junk, max_size=3))
    before = _rows(world)
    out = box.call(name, args)
    if out.error is not None:
        assert _rows(world) == before, (name, args, out.error)
        assert "\n" not in out.error
    else:
        assert out.trace_arguments is not None
