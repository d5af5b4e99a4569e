"""Copy-on-write worlds: ``copy``, ``savepoint`` and ``rollback`` behave like full copies.

A model world keeps a deep copy of every snapshot after each operation (what the world did
before its snapshots were shared); random sequences of writes, copies, savepoints and
rollbacks must leave every world with exactly the model's snapshots, and a world must never
see another's writes.
"""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trace_gym.toolsandbox.toolbox import ToolBox
from trace_gym.toolsandbox.world import World, WorldError, counter_ids

CONTACTS = [{"person_id": f"p{i}", "name": f"Name {i}", "phone_number": f"+1415555010{i}", "relationship": "friend",
             "is_self": i == 0} for i in range(3)]


def _world() -> World:
    return World.from_tables({"CONTACT": CONTACTS, "REMINDER": []}, new_id=counter_ids("test/"))


def _apply(w: World, op: tuple) -> None:
    kind = op[0]
    if kind == "add":
        w.add("CONTACT", [{"person_id": op[1], "name": op[1], "is_self": False}])
    elif kind == "remove":
        try:
            w.remove("CONTACT", "person_id", op[1])
        except WorldError:
            pass  # a removal that matched nothing (it still wrote its snapshot)
    elif kind == "setting":
        w.set_setting("wifi", op[1])
    elif kind == "index":
        w.write_index += 1


_OPS = st.one_of(
    st.tuples(st.just("add"), st.sampled_from(["a", "b", "c"])),
    st.tuples(st.just("remove"), st.sampled_from(["p0", "p1", "p2", "a", "zz"])),
    st.tuples(st.just("setting"), st.booleans()),
    st.tuples(st.just("index")),
    st.tuples(st.just("copy")),
    st.tuples(st.just("savepoint")),
    st.tuples(st.just("rollback")),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_OPS, max_size=25))
def test_shared_snapshots_behave_like_private_copies(ops):
    worlds = [_world()]  # each op acts on the newest world; copies keep the older ones alive
    models = [worlds[0].snapshots()]
    marks: list[tuple[dict, dict]] = []  # (world savepoint, model at that point) of the newest world
    for op in ops:
        w = worlds[-1]
        if op[0] == "copy":
            worlds.append(w.copy())
            models.append(copy.deepcopy(models[-1]))
            marks = []
        elif op[0] == "savepoint":
            marks.append((w.savepoint(), copy.deepcopy(models[-1])))
        elif op[0] == "rollback":
            if marks:
                mark, model = marks.pop()
                w.rollback(mark)
                models[-1] = model
        else:
            _apply(w, op)
            models[-1] = w.snapshots()
        for world, model in zip(worlds, models, strict=True):  # nobody sees another world's writes
            assert world.snapshots() == model


def test_a_copy_writes_its_own_rows_and_leaves_the_original_alone():
    w = _world()
    c = w.copy()
    c.set_setting("wifi", False)
    c.remove("CONTACT", "person_id", "p1")
    assert w.setting("wifi") is True and [r["person_id"] for r in w.rows("CONTACT")] == ["p0", "p1", "p2"]
    assert c.setting("wifi") is False and [r["person_id"] for r in c.rows("CONTACT")] == ["p0", "p2"]
    w.set_setting("cellular", False)  # the original writes after sharing: the copy does not see it
    assert c.setting("cellular") is True


def test_rollback_undoes_writes_since_the_savepoint_and_keeps_earlier_ones():
    w = _world()
    w.add("CONTACT", [{"person_id": "kept", "name": "Kept"}])
    before = w.snapshots()
    mark = w.savepoint()
    w.add("CONTACT", [{"person_id": "gone", "name": "Gone"}])
    w.set_setting("wifi", False)
    with pytest.raises(WorldError):
        w.remove("CONTACT", "person_id", "nobody")  # leaves a snapshot behind, like upstream
    w.rollback(mark)
    assert w.snapshots() == before
    w.add("CONTACT", [{"person_id": "again", "name": "Again"}])  # writing after a rollback works as usual
    assert [r["person_id"] for r in w.rows("CONTACT")][-2:] == ["kept", "again"]


def test_latest_rows_are_the_rows_themselves_and_rows_are_copies():
    w = _world()
    assert w.latest_rows("CONTACT") is w.latest_rows("CONTACT")
    assert w.rows("CONTACT") == w.latest_rows("CONTACT") and w.rows("CONTACT")[0] is not w.latest_rows("CONTACT")[0]


def test_rows_are_normalised_on_the_fast_path_and_the_general_one():
    ordered = {"reminder_id": "r", "content": "x", "creation_timestamp": 5, "reminder_timestamp": 7.5, "latitude": None,
               "longitude": True}
    shuffled = {"content": "x", "reminder_id": "r", "creation_timestamp": 5}
    w = World.from_tables({"REMINDER": [ordered, shuffled]})
    a, b = w.rows("REMINDER")
    assert list(a) == list(b) == list(ordered)
    assert a["creation_timestamp"] == 5.0 and type(a["creation_timestamp"]) is float and a["longitude"] is True
    assert b["creation_timestamp"] == 5.0 and type(b["creation_timestamp"]) is float and b["latitude"] is None
    assert ordered["creation_timestamp"] == 5 and type(ordered["creation_timestamp"]) is int  # the input is not changed
    with pytest.raises(WorldError, match="unknown column"):
        World.from_tables({"REMINDER": [{**ordered, "extra": 1}]})


def test_a_toolbox_rebound_to_another_world_runs_there(toolsandbox_data):
    box = ToolBox(_world())
    other = _world()
    rebound = box.on(other)
    assert rebound.names == box.names and rebound.world is other and box.world is not other
    out = rebound.call("set_wifi_status", {"on": False})
    assert out.error is None and other.setting("wifi") is False and box.world.setting("wifi") is True
