"""The README and docs/ cannot rot: every relative link and #anchor resolves (GitHub's heading slugs), every command
line they show (``trace-gym ...``, ``python benchmarks/...``, ``examples/...``, ``scripts/...``) is accepted by the
real argument parser of the program it runs, values included, every Python block of docs/ runs, and the README's
quickstart runs.

A Python block that needs what a test cannot have (a trained model, a server, minutes of compute) starts with a
``# requires: ...`` line saying what; it is reported as skipped with that reason, and there may be few of them.

Each checker returns the problems it finds (an empty list when the pages are sound); the ``*_catches_*`` tests
feed each one a broken page, so none of them can pass by finding nothing."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from tests.helpers_docs import FENCE, INLINE, Command, commands_in, parse_problem, python_blocks, to_json

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 250

LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)  # http:, https:, mailto:, …


def _blank_code(text: str) -> str:
    """``text`` with fenced blocks and inline code spans blanked out (same length, newlines kept), so that
    neither links nor headings are read inside code."""
    def blank(m: re.Match) -> str:
        return re.sub(r"[^\n]", " ", m.group(0))

    return INLINE.sub(blank, FENCE.sub(blank, text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its rendered text lower-cased, every character but letters, marks,
    numbers, ``_``, ``-`` and spaces dropped, spaces turned into ``-``."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link shows its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "")
    keep = (ch for ch in text.lower()
            if ch in " -" or unicodedata.category(ch)[0] in "LMN" or unicodedata.category(ch) == "Pc")
    return "".join(keep).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading's anchor in a page; a repeated slug gets ``-1``, ``-2``, … as on GitHub."""
    seen: dict[str, int] = {}
    out = set()
    for m in HEADING.finditer(_blank_code_keep_headings(text)):
        s = slug(m.group(2))
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")
    return out


def _blank_code_keep_headings(text: str) -> str:
    """``text`` without its fenced blocks (a ``# comment`` in a shell block is no heading); inline code stays,
    since a heading's code is part of its anchor."""
    return FENCE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def link_problems(page: Path, text: str | None = None) -> list[str]:
    """Relative links of ``page`` whose file is missing or whose ``#anchor`` is not a heading there."""
    text = page.read_text(encoding="utf-8") if text is None else text
    problems = []
    for m in LINK.finditer(_blank_code(text)):
        target = m.group(1)
        if EXTERNAL.match(target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        where = f"{page.relative_to(ROOT)}: ({target})"
        if not dest.exists():
            problems.append(f"{where}: no such file {dest}")
            continue
        if anchor:
            if dest.suffix != ".md" or dest.is_dir():
                problems.append(f"{where}: an anchor into a file that is not a markdown page")
            elif anchor not in anchors(dest.read_text(encoding="utf-8") if dest != page else text):
                problems.append(f"{where}: no heading with anchor #{anchor} in {dest.name}")
    return problems


# --- glossary terms ----------------------------------------------------------------------------------------

GLOSSARY = ROOT / "docs" / "glossary.md"
# Each glossary term as the pages write it; on every page that uses it, its first use links to its entry.
TERMS = {
    "passk": r"pass\^(?:k|K|\d)",
    "milestone-similarity": r"milestone similarity",
    "refusal-floor": r"refusal floor",
    "answerable": r"\banswerable\b",
    "ended": r"share of episodes the agent ended|\bended shares?\b",
    "charged": r"\bcharged\b",
    "ledger": r"\bledger\b",
    "forced": r"\bforced\b",
    "rehearse": r"\brehears\w*",
    "cover": r"`cover`",
    "gate-routing-rule": r"`gate`",
    "vote": r"`vote`",
    "oracle": r"\boracle\b",
    "joint-adapter": r"\bjoint adapter\b",
    "insufficient-information": r"\binsufficient[- ]information\b",
    "held-out": r"\bheld-out\b",
    "paired-difference": r"\bpaired difference\b",
}
# Pages whose terms are linked: the README but its headline result, and docs/ but the glossary itself, the
# generated env reference and the results page (whose figures and wording are kept as recorded).
UNLINKED_PAGES = {"glossary.md", "env-reference.md", "results.md"}


def _blank(m: re.Match) -> str:
    return re.sub(r"[^\n]", " ", m.group(0))


def term_problems(page: Path, text: str | None = None) -> list[str]:
    """Glossary terms whose first use on ``page`` (outside code blocks, headings and, for a word, code spans) is
    not a link to the term's entry in docs/glossary.md."""
    text = page.read_text(encoding="utf-8") if text is None else text
    if page.name == "README.md":  # the headline result's section is kept as recorded
        start = text.find("## Headline result")
        end = text.find("\n## ", start + 1)
        if start >= 0:
            text = text[:start] + re.sub(r"[^\n]", " ", text[start:end]) + text[end:]
    text = HEADING.sub(_blank, re.sub(r"<!--.*?-->", _blank, FENCE.sub(_blank, text), flags=re.S))
    prose = INLINE.sub(_blank, text)
    glossary = (GLOSSARY.relative_to(page.parent) if page.parent == GLOSSARY.parent else
                Path("docs") / GLOSSARY.name).as_posix()
    links = [(m.start(), m.end(), m.group(1)) for m in LINK.finditer(text)]
    problems = []
    for anchor, pattern in TERMS.items():
        m = re.search(pattern, text if pattern.startswith("`") else prose, re.I)
        if m is None:
            continue
        inside = [target for a, b, target in links if a <= m.start() < b]
        if inside != [f"{glossary}#{anchor}"]:
            line = text.count("\n", 0, m.start()) + 1
            problems.append(f"{page.relative_to(ROOT)}:{line}: the first '{m.group(0)}' is not a link to "
                            f"{glossary}#{anchor}")
    return problems


@pytest.fixture(scope="module")
def parser() -> argparse.ArgumentParser:
    from trace_gym.cli import COMMANDS, build_parser

    p = build_parser()
    verbs = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert len(verbs) >= len(COMMANDS), f"a command failed to register: {sorted(verbs)}"  # train also adds sft
    return p


# --- the tests ---------------------------------------------------------------------------------------------

def test_the_docs_exist_and_the_readme_is_a_front_page():
    names = {p.name for p in PAGES}
    for page in ("README.md", "envs.md", "data.md", "tau2.md", "toolsandbox.md", "capabilities.md", "pipeline.md",
                 "comparisons.md", "training.md", "performance.md", "architecture.md", "results.md"):
        assert page in names, f"docs/{page} is missing"
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines (a front page has at most {README_MAX_LINES})"


def test_every_page_is_in_the_docs_index():
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    linked = {Path(m.group(1).partition("#")[0]).name for m in LINK.finditer(index)}
    missing = [p.name for p in PAGES if p.parent.name == "docs" and p.name != "README.md" and p.name not in linked]
    assert not missing, f"docs/README.md does not link {missing}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_and_anchors_resolve(page):
    problems = link_problems(page)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", [p for p in PAGES if p.name not in UNLINKED_PAGES],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_glossary_terms_are_linked_where_they_first_appear(page):
    problems = term_problems(page)
    assert not problems, "\n".join(problems)


def test_every_term_checked_has_a_glossary_entry():
    assert set(TERMS) <= anchors(GLOSSARY.read_text(encoding="utf-8"))


def _page_commands(page: Path) -> list[Command]:
    return commands_in(page.read_text(encoding="utf-8"), str(page.relative_to(ROOT)))


def cli_problems(commands: list[Command], parser: argparse.ArgumentParser) -> list[str]:
    """What the CLI's parser refuses in the ``trace-gym`` commands."""
    found = [(c, parse_problem(parser, c.args, c.inline)) for c in commands if c.program == "trace-gym"]
    return [f"{c}: {problem}" for c, problem in found if problem]


def script_problems(commands: list[Command]) -> list[str]:
    """What each script's own parser refuses in the script commands (parsed in a child process, since capturing
    a script's parser runs its imports)."""
    todo = [c for c in commands if c.program != "trace-gym"]
    if not todo:
        return []
    run = subprocess.run([sys.executable, "-m", "tests.helpers_docs"], input=to_json(todo), cwd=ROOT,
                         env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def run_python_block(code: str, page: str, line: int, cwd: Path) -> subprocess.CompletedProcess:
    """Run a page's Python block as a program in ``cwd``, offline (a socket that connects raises); a traceback
    names the page and its line."""
    runner = ("import socket, sys\n"
              "def offline(*a, **k):\n"
              "    raise OSError('a docs example may not reach the network')\n"
              "socket.socket.connect = offline\n"
              "socket.create_connection = offline\n"
              "code = sys.stdin.read()\n"
              "exec(compile('\\n' * (int(sys.argv[2]) - 1) + code, sys.argv[1], 'exec'), {'__name__': '__main__'})\n")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    return subprocess.run([sys.executable, "-c", runner, page, str(line)], input=code, cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


DOC_PAGES = [p for p in PAGES if p.parent.name == "docs"]
BLOCKS = [(page, line, code, requires) for page in DOC_PAGES
          for line, code, requires in python_blocks(page.read_text(encoding="utf-8"))]
MAX_NOT_RUN = 5  # blocks that need a trained model, a server or minutes of compute; each says why


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_trace_gym_commands_are_accepted_by_the_cli(page, parser):
    problems = cli_problems(_page_commands(page), parser)
    assert not problems, "\n".join(problems)


def test_script_commands_are_accepted_by_their_parsers():
    problems = script_problems([c for page in PAGES for c in _page_commands(page)])
    assert not problems, "\n".join(problems)


def test_the_pages_hold_commands_to_check(parser):
    """The checker reads the pages' commands (a pattern that matched nothing would pass every page)."""
    commands = [c for p in PAGES for c in _page_commands(p)]
    verbs = {c.args.split()[0] for c in commands if c.program == "trace-gym" and c.args}
    assert sum(c.program == "trace-gym" for c in commands) >= 30
    assert {"rollout", "analyze", "synthesize", "train", "eval", "data", "compare", "serve"} <= verbs
    scripts = {c.program for c in commands if c.program != "trace-gym"}
    assert {"benchmarks/trace_vs_baselines.py", "benchmarks/sft_overhead.py", "examples/trl_grpo.py",
            "scripts/make_env_reference.py"} <= scripts, scripts


@pytest.mark.parametrize("page,line,code,requires", BLOCKS,
                         ids=[f"{b[0].relative_to(ROOT)}:{b[1]}" for b in BLOCKS])
def test_python_blocks_of_the_docs_run(page, line, code, requires, tmp_path):
    if requires:
        pytest.skip(f"{page.relative_to(ROOT)}:{line} requires {requires}")
    run = run_python_block(code, str(page.relative_to(ROOT)), line, tmp_path)
    assert run.returncode == 0, f"{page.relative_to(ROOT)}:{line} failed:\n{run.stderr[-4000:]}"


def test_few_python_blocks_go_unrun_and_each_says_why():
    assert len(BLOCKS) >= 8, "the docs' Python blocks were not found"
    not_run = [(b[0].name, b[1], b[3]) for b in BLOCKS if b[3]]
    assert len(not_run) <= MAX_NOT_RUN, f"{len(not_run)} Python blocks are not run: {not_run}"
    assert all(len(why.split()) >= 3 for _, _, why in not_run), not_run


def test_the_readme_quickstart_runs(monkeypatch):
    """The README's Python quickstart runs as written: offline (no socket may connect), with the data the package
    finds, and its action is a valid tool call (no action error)."""
    import socket

    def no_network(*args, **kwargs):
        raise AssertionError("the quickstart tried to reach the network")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Gymnasium quickstart"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert 'gym.make("trace/cap-refund-policy-v0")' in code and "env.step(" in code
    scope: dict = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), scope)  # noqa: S102
    assert not scope["info"].get("action_error"), scope["info"]["action_error"]
    assert "[tool get_order_details]" in scope["obs"] and scope["obs"] in out.getvalue()
    assert not scope["terminated"] and not scope["truncated"]


# --- the checkers catch what they are for ---------------------------------------------------------------

def test_slugs_follow_github():
    assert slug("Comparing states: `state_fingerprint()`") == "comparing-states-state_fingerprint"
    assert slug("τ²-bench telecom: dual control") == "τ²-bench-telecom-dual-control"
    assert slug("Rollout and training speed (`rollout_speed.py`)") == "rollout-and-training-speed-rollout_speedpy"
    assert slug("Warm start: SFT on reference episodes") == "warm-start-sft-on-reference-episodes"
    assert anchors("# A\n## A\n```\n# not a heading\n```\n## B\n") == {"a", "a-1", "b"}


def test_link_check_catches_a_missing_file_and_a_missing_anchor():
    page = ROOT / "docs" / "envs.md"
    text = ("# Top\n\n[ok](#top) [ok](data.md#where-the-data-is-found) [gone](no-such-page.md) "
            "[bad](data.md#no-such-heading) [self](#nowhere) [web](https://example.org/x#y)\n"
            "`[not a link](missing.md)`\n```\n[in code](missing-too.md)\n```\n")
    problems = link_problems(page, text)
    assert len(problems) == 3, problems
    assert any("no-such-page.md" in p for p in problems) and any("#no-such-heading" in p for p in problems)
    assert any("#nowhere" in p for p in problems)


def test_command_check_catches_an_unknown_verb_sub_verb_flag_or_value(parser):
    def problems(page: str) -> list[str]:
        return cli_problems(commands_in(page, "page.md"), parser)

    assert problems("`trace-gym eval --env trace/toolsandbox-v0 --policy base --greedy ... [--trials 1]`") == []
    assert problems("`trace-gym data fetch tau2 --from PATH_OR_URL`") == []
    assert problems("`trace-gym card --policy P --domain D --episodes N --seeds A-B`") == []  # N: any int
    assert problems("`trace-gym data fetch`") == []  # quoted inline, a command may leave out what it requires
    assert "invalid choice: 'evaluate'" in problems("`trace-gym evaluate --env x`")[0]
    assert "invalid choice: 'download'" in problems("`trace-gym data download tau2`")[0]
    assert "--no-such-flag" in problems("`trace-gym train --env x --no-such-flag 3`")[0]
    assert "--out" in problems("`trace-gym data status --out x`")[0]  # a flag of another verb
    assert "invalid int value: 'eight'" in problems("`trace-gym calibrate x --policy smollm2 --samples eight`")[0]
    assert "invalid choice: 'nowhere'" in problems("`trace-gym synthesize x --domain nowhere --out y`")[0]
    assert "required" in problems("```bash\ntrace-gym rollout trace/tau2-mock-v0 --seeds 0-3\n```\n")[0]
    page = "Run `trace-gym eval --polcy base`.\n\n```bash\ntrace-gym rollout x \\\n    --seedz 0-3  # typo\n```\n"
    found = problems(page)
    assert len(found) == 2 and "--polcy" in found[0] + found[1] and "--seedz" in found[0] + found[1]


def test_script_check_catches_a_wrong_flag_or_value():
    page = ("```bash\n"
            "python benchmarks/trace_vs_baselines.py --preset cpu-toolsandbox --swap --out runs/x\n"
            "python benchmarks/trace_vs_baselines.py --preset no-such-preset\n"
            "python benchmarks/sft_overhead.py --envs trace/cap-refund-policy-v0 --steps three\n"
            "python scripts/make_env_reference.py --chekc\n"
            "python benchmarks/train_dtype.py --steps 2\n"
            "```\n"
            "Then `trace_vs_baselines.py --router-outcomes N` and `examples/byo_domain/run_loop.py --model huge`.\n")
    commands = commands_in(page, "page.md")
    assert [c.program for c in commands] == ["benchmarks/trace_vs_baselines.py"] * 2 + [
        "benchmarks/sft_overhead.py", "scripts/make_env_reference.py", "benchmarks/train_dtype.py",
        "benchmarks/trace_vs_baselines.py", "examples/byo_domain/run_loop.py"]
    found = script_problems(commands)
    assert len(found) == 5, found
    assert "invalid choice: 'no-such-preset'" in found[0]
    assert "invalid int value: 'three'" in found[1]
    assert "--chekc" in found[2]
    assert "takes no arguments" in found[3]
    assert "invalid choice: 'huge'" in found[4]


def test_block_runner_catches_a_failing_block(tmp_path):
    ok = run_python_block("import trace_gym\nprint('ran')\n", "docs/x.md", 10, tmp_path)
    assert ok.returncode == 0 and ok.stdout.strip() == "ran"
    broken = run_python_block("import gymnasium as gym\n\ngym.make('trace/no-such-env-v0')\n", "docs/x.md", 10,
                              tmp_path)
    assert broken.returncode != 0 and 'File "docs/x.md", line 12' in broken.stderr
    offline = run_python_block("import urllib.request\nurllib.request.urlopen('http://example.org')\n",
                               "docs/x.md", 1, tmp_path)
    assert offline.returncode != 0 and "may not reach the network" in offline.stderr
    page = "```python\n# requires: a model server at 127.0.0.1:8000\nx = 1\n```\n\n```python\ny = 2\n```\n"
    assert python_blocks(page) == [(2, "# requires: a model server at 127.0.0.1:8000\nx = 1\n",
                                    "a model server at 127.0.0.1:8000"), (7, "y = 2\n", None)]


def test_term_check_catches_an_unlinked_first_use():
    page = ROOT / "docs" / "envs.md"
    text = ("# The refusal floor\n\nThe `cover` rule and the [refusal floor](glossary.md#refusal-floor); the "
            "refusal floor again.\n\n```\npass^k in code\n```\nThe ledger, then the [ledger](glossary.md#ledger).\n")
    problems = term_problems(page, text)
    assert len(problems) == 2, problems
    assert {p.split("'")[1] for p in problems} == {"`cover`", "ledger"}
    assert any(":8:" in p and "'ledger'" in p for p in problems)  # the line of the first, unlinked use
    linked = "[`cover`](glossary.md#cover) and the [ledger](glossary.md#ledger), the [refusal floor](glossary.md#oracle)"
    assert [p.split("'")[1] for p in term_problems(page, linked)] == ["refusal floor"]  # the wrong entry
