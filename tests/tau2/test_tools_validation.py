"""Our pydantic-like field checks against pydantic itself (the dev extra; the corpus was made with pydantic 2.14.4)."""

from __future__ import annotations

import math
from typing import Literal

import pydantic
import pytest

from trace_gym.tau2.validation import FLOAT, INT, STR, Field, ValidationError, build, literal, model_list, optional


class _P(pydantic.BaseModel):
    first_name: str
    dob: str


class M(pydantic.BaseModel):
    s: str
    i: int
    f: float
    l: Literal["a", "b", "c"]  # noqa: E741
    o: Literal["x"] | None = None
    ps: list[_P]


FIELDS = {
    "s": Field(STR), "i": Field(INT), "f": Field(FLOAT), "l": Field(literal("a", "b", "c")),
    "o": Field(optional(literal("x")), default=None),
    "ps": Field(model_list("P", {"first_name": Field(STR), "dob": Field(STR)})),
}
GOOD = {"s": "x", "i": 1, "f": 1.5, "l": "a", "ps": []}
VALUES = {
    "s": ["x", 1, 1.5, None, True, [], {}],
    "i": [1, 1.0, 1.5, "1", " 2 ", "1.0", "1.5", "x", True, False, None, [], float("inf"), "1e3", "+3", "-0",
          "1_000", 10**30, 1e30],
    "f": [1, 1.5, "1.5", "x", True, None, [], " 2.5 ", "1e3", "inf", "1_000.5", ".5", "5."],
    "l": ["a", "d", 1, None, "A"],
    "o": [None, "x", "y", 1],
    "ps": [[], [{"first_name": "a", "dob": "b"}], [{"first_name": "a"}], ["x"], "x", None,
           [{"first_name": 1, "dob": 2}, 3], ({"first_name": "a", "dob": "b"},), {"a": 1}],
}
CASES = [(k, v) for k, vs in VALUES.items() for v in vs]


@pytest.mark.parametrize("key,value", CASES, ids=[f"{k}={v!r}" for k, v in CASES])
def test_same_outcome_as_pydantic(key, value):
    data = dict(GOOD, **{key: value})
    try:
        expected = ("ok", M(**data).model_dump()[key])
    except pydantic.ValidationError as exc:
        expected = ("err", str(exc).split("\n")[0], [e["type"] for e in exc.errors()])
    try:
        got = ("ok", build("M", FIELDS, data)[key])
    except ValidationError as exc:
        got = ("err", str(exc).split("\n")[0], [e[2] for e in exc.errors])
    assert got == expected
    if got[0] == "ok":
        assert type(got[1]) is type(expected[1])
        if isinstance(got[1], float):
            assert math.isclose(got[1], expected[1])


def test_error_text_layout():
    with pytest.raises(ValidationError) as info:
        build("Task", {"title": Field(STR), "n": Field(INT)}, {"title": None})
    lines = str(info.value).split("\n")
    assert lines[0] == "2 validation errors for Task"
    assert lines[1] == "title"
    assert lines[2].startswith("  Input should be a valid string [type=string_type, input_value=None")
