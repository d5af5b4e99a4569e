"""τ²-bench tool schemas derived from tau2-bench's Python source (read with ``ast``, never run).

* Against upstream: with ``TAU2_BENCH_SOURCE`` pointing at a tau2-bench v1.0.1 checkout or source
  archive, every domain's derived ``tools.json``/``user_tools.json`` must equal the sibling data
  folder's file byte for byte (skipped without it: upstream's code is not part of this repository).
* Against pydantic: the parameter schemas of generated signatures (and of the test stand-in's
  models) must equal what pydantic itself generates for the same annotations and defaults.
* Docstrings: the Google-style rules, case by case.
"""

from __future__ import annotations

import json
import sys
import types
import typing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.datafetch_fake_tau2 import DATA_MODEL, FILES, UPSTREAM_ENV, reader, upstream_source
from trace_gym.data import load_manifest
from trace_gym.data.archive import open_source
from trace_gym.data.tau2_schema_derive import SchemaDeriveError, derive_domain
from trace_gym.data.tau2_schema_docstrings import DocstringStyleError, parse_docstring

# --------------------------------------------------------------------------- upstream (when available)


def test_derived_schemas_equal_the_shipped_files_for_every_domain(tau2_data, tmp_path):
    source = upstream_source()
    if source is None:
        pytest.skip(f"set {UPSTREAM_ENV} to a tau2-bench v1.0.1 checkout or source archive")
    manifest = load_manifest("tau2")
    derivable = {r: e["derive"] for r, e in manifest["files"].items() if e.get("derive")}
    assert sorted(derivable) == ["domains/airline/tools.json", "domains/mock/tools.json", "domains/mock/user_tools.json",
                                 "domains/retail/tools.json", "domains/telecom/tools.json",
                                 "domains/telecom/user_tools.json"]
    with open_source(source, tmp_path, lambda _m: None) as files:
        for rel, how in derivable.items():
            out, used = derive_domain(files.first, how["domain"], [Path(rel).name])
            assert out[Path(rel).name] == (tau2_data / "tau2" / rel).read_bytes(), rel  # bytes, not just JSON
            assert used[0] == f"src/tau2/domains/{how['domain']}/{Path(rel).name[:-5]}.py"


# --------------------------------------------------------------------------- the stand-in toolkit


def _tools(files: dict[str, str] = FILES, name: str = "tools.json") -> list[dict]:
    out, _ = derive_domain(reader(files), "mock", [name])
    return json.loads(out[name])


def test_toolkit_order_types_and_descriptions():
    tools = _tools()
    # own tools in source order (an override keeps its own place), then the base class's remaining ones
    assert [t["name"] for t in tools] == ["draw", "count", "sketch", "transfer_to_human_agents"]
    kinds = {t["name"]: (t["tool_type"], t["mutates_state"]) for t in tools}
    assert kinds == {"draw": ("write", True), "count": ("read", False), "sketch": ("write", False),
                     "transfer_to_human_agents": ("generic", False)}
    fn = {t["name"]: t["openai_schema"]["function"] for t in tools}
    assert fn["transfer_to_human_agents"]["description"] == "Hand the conversation over.\n\nOnly when asked."
    assert fn["sketch"]["description"] == "sketch"  # no docstring: the name
    assert fn["count"]["description"] == "Count shapes."  # the override's docstring, not the base's
    draw = fn["draw"]["parameters"]["properties"]
    assert draw["shape"]["description"] == "The shape to draw,\nwith its corners."
    assert draw["color"]["description"] == "Paint it this colour." and "title" not in draw["color"]
    assert list(tools[0]) == ["name", "tool_type", "mutates_state", "openai_schema"]
    [wave] = _tools(name="user_tools.json")
    assert wave["openai_schema"]["function"]["description"] == "Wave at the agent.\n\nReturns how often you waved."


def _pydantic_parameters(fields: dict[str, tuple[Any, Any, str | None]], extra_ns: dict | None = None) -> dict:
    import pydantic
    spec = {}
    for name, (anno, default, desc) in fields.items():
        spec[name] = (anno, pydantic.Field(default, description=desc) if desc is not None else default)
    return pydantic.create_model("parameters", **spec).model_json_schema()


def _namespace() -> dict:
    """The stand-in data model, imported as a module (pydantic resolves annotations through it)."""
    name = "tests._fake_tau2_data_model"
    if name not in sys.modules:
        module = types.ModuleType(name)
        sys.modules[name] = module
        exec(compile(DATA_MODEL, "data_model.py", "exec"), module.__dict__)  # the test's own code, not upstream's
    return dict(vars(sys.modules[name]))


def test_stand_in_parameters_equal_pydantic():
    ns = _namespace()
    tools = {t["name"]: t["openai_schema"]["function"]["parameters"] for t in _tools()}
    expected = _pydantic_parameters({
        "shape": (ns["Union"][ns["Shape"], dict], ..., "The shape to draw,\nwith its corners."),
        "color": (ns["Optional"][ns["Color"]], None, "Paint it this colour."),
        "mode": (ns["Mode"], "fast", None)})
    assert json.dumps(tools["draw"]) == json.dumps(expected)  # same keys, same order
    expected = _pydantic_parameters({"points": (ns["List"][ns["Point"] | dict], ..., None), "note": (Any, ..., None)})
    assert json.dumps(tools["sketch"]) == json.dumps(expected)


_BASES = ["str", "int", "float", "bool", "dict", "list", "Any", "None", "Color", "Level", "Point", "Shape", "Square",
          "Mode", "Literal['a', 'b']", "Literal[3]", "Dict", "List"]


def _types() -> st.SearchStrategy[str]:
    return st.recursive(
        st.sampled_from(_BASES),
        lambda inner: st.one_of(
            inner.map("List[{}]".format), inner.map("list[{}]".format), inner.map("Optional[{}]".format),
            inner.map("Dict[str, {}]".format),
            st.tuples(inner, inner).map(lambda p: "Union[{}, {}]".format(*p)),
            st.tuples(inner, inner).filter(lambda p: "None" not in p[0]).map(lambda p: "{} | {}".format(*p))),
        max_leaves=4)


def _fresh_eval(expr: str, ns: dict) -> Any:
    """Evaluate a type with typing's caches cleared: typing returns a cached ``Dict[str, Union[B, A]]`` for
    ``Dict[str, Union[A, B]]`` (equal unions), so the member order would depend on what was built before."""
    for clear in typing._cleanups:
        clear()
    return eval(expr, ns)  # noqa: S307 - the test's own expressions


_DEFAULTS = st.sampled_from(["None", "'x'", "3", "2.5", "True", "Color.RED", "Level.HIGH", "-1"])
_WORDS = st.from_regex(r"[A-Z][a-z]{0,8}( [a-z]{1,8}){0,4}\.", fullmatch=True)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(params=st.lists(st.tuples(_types(), st.one_of(st.none(), _DEFAULTS), st.one_of(st.none(), _WORDS)),
                       min_size=0, max_size=4))
def test_generated_signatures_equal_pydantic(params):
    ns = _namespace()
    params = sorted(params, key=lambda p: p[1] is not None)  # defaults last, as Python requires
    names = [f"p{i}_arg" for i in range(len(params))]
    sig = ", ".join(f"{n}: {t}" + (f" = {d}" if d is not None else "") for n, (t, d, _) in zip(names, params, strict=True))
    docs = "".join(f"\n            {n}: {w}" for n, (_, _, w) in zip(names, params, strict=True) if w is not None)
    doc = f'"""Do it.\n\n        Args:{docs}\n        """' if docs else '"""Do it."""'
    tools_py = ("from typing import Any, Dict, List, Literal, Optional, Union\n"
                "from tau2.domains.mock.data_model import Color, Level, Mode, Point, Shape, Square\n"
                "from tau2.environment.toolkit import ToolKitBase, ToolType, is_tool\n\n\n"
                "class MockTools(ToolKitBase):\n    @is_tool(ToolType.READ)\n"
                f"    def act(self{', ' if sig else ''}{sig}) -> str:\n        {doc}\n        return ''\n")
    [tool] = _tools({**FILES, "src/tau2/domains/mock/tools.py": tools_py})
    fields = {n: (_fresh_eval(t, ns), ... if d is None else eval(d, ns), w)  # noqa: S307 - the test's own expressions
              for n, (t, d, w) in zip(names, params, strict=True)}
    expected = _pydantic_parameters(fields)
    assert json.dumps(tool["openai_schema"]["function"]["parameters"]) == json.dumps(expected), tools_py


# --------------------------------------------------------------------------- docstrings


def test_docstring_sections_and_continuations():
    doc = """
        Short line.
        Longer text
          keeps its indent.

        Args:
            a: First,
                continued here.
            b (int, optional): Second.
            c:
        Returns the rest.
        Raises:
            ValueError: When bad.
        """
    short, long, params = parse_docstring(doc)
    assert short == "Short line." and long == "Longer text\n  keeps its indent."
    assert params == {"a": ("First,\ncontinued here.", None), "b": ("Second.", "int"), "c": ("", None)}


def test_a_section_that_does_not_parse_leaves_plain_text():
    doc = "Do it.\n\n    Args:\n        a: fine\n    Raises:\n        no colon here\n    "
    short, long, params = parse_docstring(doc)
    assert (short, params) == ("Do it.", {}) and long.startswith("Args:\n    a: fine")
    assert parse_docstring("Only text.\n    Returns the value.\n") == ("Only text.", "Returns the value.", {})
    assert parse_docstring(None) == ("", "", {})


@pytest.mark.parametrize("doc", ["Do it.\n\n:param a: thing", "Do it.\n\n@param a: thing",
                                 "Do it.\n\nParameters\n----------\na : int"])
def test_other_docstring_styles_are_refused(doc):
    with pytest.raises(DocstringStyleError):
        parse_docstring(doc)


# --------------------------------------------------------------------------- what is refused


@pytest.mark.parametrize("change, message", [
    (("mode: Mode = \"fast\"", "mode: Tuple[int, int] = None"), r"tools\.py:\d+: unknown name Tuple"),
    (("from tau2.domains.mock.data_model", "from tau2.domains.mock.missing_model"), "missing_model.py: not in the source"),
    (("def _helper(self) -> None:", "def _helper(self, *rest) -> None:"), None),  # not a tool: ignored
    (("points: List[Point | dict], note)", "points: List[Point | dict], *rest)"), r"\*args"),
    (("class MockTools(BoardBase):", "class Other(ToolKitBase):\n    pass\n\n\nclass MockTools(BoardBase):"),
     "expected one ToolKitBase subclass, found Other, MockTools"),
    (("from typing import List", "raise SystemExit('the code ran')\nfrom typing import List"), None),  # never run
    (("from typing import List", "Loop = Again\nAgain = Loop\nfrom typing import List"), None),  # unused: harmless
    (("mode: Mode = \"fast\"", "mode: Loop = \"fast\""), "unknown name Loop"),
    (("from typing import List", "Loop = Again\nAgain = Loop\nfrom typing import List", "mode: Mode = \"fast\"",
      "mode: Loop = \"fast\""), "circular"),
])
def test_unsupported_source_fails_with_file_and_reason(change, message):
    text = FILES["src/tau2/domains/mock/tools.py"]
    for old, new in zip(change[::2], change[1::2], strict=True):
        text = text.replace(old, new)
    files = {**FILES, "src/tau2/domains/mock/tools.py": text}
    assert files != FILES
    if message is None:
        assert _tools(files) == _tools()
        return
    with pytest.raises(SchemaDeriveError, match=message):
        _tools(files)


_LINE = st.one_of(
    st.from_regex(r"[A-Z][a-z]{1,6}( [a-z(),.']{1,6}){0,3}\.?", fullmatch=True),
    st.sampled_from(["", "Args:", "Returns:", "Raises:", "Examples:", "Attributes:", "Returns the value.", "Args",
                     "Checks:", "    - one", "  - two", "Yields:"]),
    st.tuples(st.sampled_from(["    ", "        ", "  ", "\t"]),
              st.from_regex(r"[a-z_]{1,6}( \((int|str)(, optional)?\))?", fullmatch=True),
              st.sampled_from([": ", ":", " "]),
              st.from_regex(r"([A-Za-z,.' ]{0,20})", fullmatch=True)).map("".join),
    st.tuples(st.sampled_from(["        ", "            ", "  "]),
              st.from_regex(r"[a-z][a-z ,.]{0,15}", fullmatch=True)).map("".join),
)


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(_LINE, max_size=12), lead=st.sampled_from(["", "\n        ", "\n"]),
       indent=st.sampled_from(["", "        "]))
def test_docstrings_read_as_docstring_parser_reads_them(lines, lead, indent):
    """The derivation reads docstrings as ``docstring_parser`` does (the dev extra pins the version the
    shipped tool schemas were generated with)."""
    import docstring_parser as dp
    doc = lead + ("\n" + indent).join(lines) + "\n" + indent
    try:
        short, long, params = parse_docstring(doc)
    except DocstringStyleError:
        return
    try:
        ref = dp.parse(doc)
    except dp.ParseError:
        pytest.fail(f"docstring_parser fails on {doc!r}; derivation reads it")
    assert (short, long) == (ref.short_description or "", ref.long_description or ""), doc
    assert params == {p.arg_name: (p.description, p.type_name) for p in ref.params}, doc
