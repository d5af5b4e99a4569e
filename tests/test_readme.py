"""The docs match the code: the environment table of docs/envs.md is the registry's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from trace_gym.cli.envs import README_END, README_START, markdown_envs_table

ROOT = Path(__file__).resolve().parents[1]
START = "<!-- envs-table:start"


ENVS_PAGE = ROOT / "docs" / "envs.md"


def readme_block(text: str) -> str:
    """The page's table, from its start marker comment to its end marker comment, inclusive."""
    i = text.find(START)
    j = text.find(README_END, i)
    if i < 0 or j < 0:
        raise AssertionError(f"docs/envs.md lacks the table markers {START} … {README_END}")
    return text[i : j + len(README_END)] + "\n"


def fresh_registry_table() -> str:
    """The table a fresh install prints (no TRACE_GYM_ENVS_DIR, nothing registered at run time)."""
    env = {k: v for k, v in os.environ.items() if k != "TRACE_GYM_ENVS_DIR"}
    code = "from trace_gym.cli.envs import markdown_envs_table; print(markdown_envs_table(), end='')"
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          check=True, timeout=120).stdout


def test_docs_environment_table_is_the_registry():
    table = fresh_registry_table()
    assert table.startswith(README_START) and table.rstrip().endswith(README_END)
    page = ENVS_PAGE.read_text(encoding="utf-8")
    assert readme_block(page) == table, (
        "docs/envs.md's environment table differs from the registry; replace the block between the markers with "
        "the output of `trace-gym envs --markdown`")


def test_every_registered_id_has_a_row_and_a_mismatch_is_caught():
    import trace_gym  # noqa: F401
    from trace_gym.registration import env_records

    table = markdown_envs_table()
    for r in env_records():
        assert f"| `{r['id']}` |" in table
    doc = f"intro\n\n{table}\nmore\n"
    assert readme_block(doc) == table
    dropped = "\n".join(line for line in table.splitlines() if "cap-flight-selection" not in line) + "\n"
    assert readme_block(f"x\n{dropped}") != table  # a row missing from the page fails the check
    with pytest.raises(AssertionError, match="markers"):
        readme_block("no table here")


def test_cells_are_escaped():
    rows = [{"id": "trace/x-v0", "family": "capability", "domain": "retail", "title": "a | b\nc"}]
    assert "| `trace/x-v0` | capability | retail | a \\| b c |" in markdown_envs_table(rows)


def test_the_fuzz_table_is_shown_once():
    text = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    section = text[text.index("## Hostile input"):]
    assert section.count("# CPython") == 1 and section.count("trace/toolsandbox-v0  ") == 1
