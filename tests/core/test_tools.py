import pytest

from trace_gym.core import Tool, ToolError, ToolSet


def make():
    state = {"n": 0}

    def add(amount: int, note: str = ""):
        state["n"] += amount
        return {"n": state["n"]}

    def boom():
        raise ToolError("the service is down")

    def bug():
        return 1 / 0

    schema = {"type": "object", "properties": {"amount": {"type": "integer"}, "note": {"type": "string"}}, "required": ["amount"]}
    ts = ToolSet([
        Tool("add", "Add.", schema, add, "write"),
        Tool("boom", "Fails.", {"type": "object", "properties": {}}, boom, "read"),
        Tool("bug", "Crashes.", {"type": "object", "properties": {}}, bug, "read"),
    ])
    return ts, state


def test_valid_call_runs_and_renders_json():
    ts, state = make()
    r = ts.call("add", {"amount": 2})
    assert (r.content, r.error) == ('{"n": 2}', False)
    assert state["n"] == 2


@pytest.mark.parametrize(
    "name, args, fragment",
    [
        ("nope", {}, "unknown tool 'nope'"),
        ("add", [], "arguments must be an object"),
        ("add", {}, "'amount' is a required property"),
        ("add", {"amount": "2"}, "is not of type 'integer'"),
        ("add", {"amount": 1, "extra": 3}, "unexpected argument(s) ['extra']"),
    ],
)
def test_bad_calls_are_errors_and_change_nothing(name, args, fragment):
    ts, state = make()
    r = ts.call(name, args)
    assert r.error and fragment in r.content
    assert state["n"] == 0


def test_tool_exceptions_become_error_results():
    ts, _ = make()
    assert ts.call("boom", {}).content == "Error: the service is down"
    r = ts.call("bug", {})
    assert r.error and "ZeroDivisionError" in r.content


def test_schemas_kinds_and_duplicates():
    ts, _ = make()
    assert [s["function"]["name"] for s in ts.schemas()] == ["add", "boom", "bug"]
    assert ts["add"].mutates_state and not ts["boom"].mutates_state
    with pytest.raises(ValueError, match="duplicate"):
        ts.add(Tool("add", "", {"type": "object"}, lambda: 0))
    with pytest.raises(ValueError, match="kind"):
        Tool("x", "", {"type": "object"}, lambda: 0, "delete")  # type: ignore[arg-type]
