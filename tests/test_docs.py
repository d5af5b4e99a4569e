"""The README and docs/ cannot rot: every relative link and #anchor resolves (GitHub's heading slugs), every
`trace-gym VERB ... --flag` written in them is accepted by the CLI's parser, and the README's quickstart runs.

Each checker returns the problems it finds (an empty list when the pages are sound); the ``*_catches_*`` tests
feed each one a broken page, so none of them can pass by finding nothing."""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 250

FENCE = re.compile(r"^(```|~~~)(.*?)\n(.*?)^\1[ \t]*$", re.S | re.M)
INLINE = re.compile(r"(`+)(.+?)\1", re.S)
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


# --- trace-gym command lines -------------------------------------------------------------------------------

def _commands_in(text: str) -> list[str]:
    """Every ``trace-gym ...`` (or ``-m trace_gym.cli ...``) command line written in a page: from shell code
    blocks (continuations joined, comments dropped) and from inline code spans."""
    found = []
    for m in FENCE.finditer(text):
        if m.group(2).strip() not in ("", "bash", "sh", "shell", "console"):
            continue
        body = m.group(3).replace("\\\n", " ")
        for line in body.splitlines():
            line = re.sub(r"(^|\s)#.*$", "", line).strip()
            found += _trace_gym_parts(line)
    for m in INLINE.finditer(FENCE.sub("", text)):
        found += _trace_gym_parts(" ".join(m.group(2).split()))
    return found


def _trace_gym_parts(line: str) -> list[str]:
    """The argument strings after each ``trace-gym`` / ``-m trace_gym.cli`` that starts a command in ``line``."""
    out = []
    for part in re.split(r"\|\||&&|[|;]", line):
        m = re.search(r"(?:^|\s|\$ )(?:trace-gym|-m trace_gym\.cli)(?:\s+(.*)|$)", part)
        if m:
            out.append((m.group(1) or "").strip())
    return out


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def command_problems(args: str, parser: argparse.ArgumentParser) -> list[str]:
    """What the CLI's parser would refuse in ``trace-gym ARGS``: an unknown verb or sub-verb, or a flag the
    (sub-)command does not define.  Placeholders (``...``, ``[--opt]``, ``FILE``, ``<name>``) are allowed;
    nothing is run."""
    try:
        tokens = shlex.split(args)
    except ValueError as exc:
        return [f"trace-gym {args}: cannot split ({exc})"]
    tokens = [t.strip("[]") for t in tokens if t.strip("[]") not in ("", "...", "…")]
    problems, current, path = [], parser, "trace-gym"
    while tokens and not tokens[0].startswith("-"):
        sub = _subparsers(current)
        if sub is None:
            break
        word = tokens.pop(0)
        if word not in sub.choices:
            if word.isupper() or word.startswith("<"):  # a placeholder verb (VERB, <command>)
                return problems
            return [f"{path} {word}: no such command (choices: {', '.join(sub.choices)})"]
        current, path = sub.choices[word], f"{path} {word}"
    known = set(current._option_string_actions) | set(parser._option_string_actions)
    for t in tokens:
        if re.fullmatch(r"--?[A-Za-z][\w-]*(=.*)?", t):
            flag = t.split("=", 1)[0]
            if flag not in known:
                problems.append(f"{path}: no option {flag} (in `trace-gym {args}`)")
    return problems


@pytest.fixture(scope="module")
def parser() -> argparse.ArgumentParser:
    from trace_gym.cli import COMMANDS, build_parser

    p = build_parser()
    verbs = _subparsers(p).choices
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


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_trace_gym_commands_are_accepted_by_the_cli(page, parser):
    commands = _commands_in(page.read_text(encoding="utf-8"))
    problems = [p for c in commands for p in command_problems(c, parser)]
    assert not problems, "\n".join(problems)


def test_the_pages_hold_commands_to_check(parser):
    """The checker reads the pages' commands (a pattern that matched nothing would pass every page)."""
    commands = [c for p in PAGES for c in _commands_in(p.read_text(encoding="utf-8"))]
    verbs = {c.split()[0] for c in commands if c}
    assert len(commands) >= 30 and {"rollout", "analyze", "synthesize", "train", "eval", "data", "compare"} <= verbs


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


def test_command_check_catches_an_unknown_verb_sub_verb_or_flag(parser):
    assert command_problems("eval --env trace/toolsandbox-v0 --policy base --greedy ... [--trials 1]", parser) == []
    assert command_problems("data fetch tau2 --from PATH_OR_URL", parser) == []
    assert command_problems("evaluate --env x", parser)[0].startswith("trace-gym evaluate: no such command")
    assert "no such command" in command_problems("data download tau2", parser)[0]
    assert "no option --no-such-flag" in command_problems("train --env x --no-such-flag 3", parser)[0]
    assert "no option --out" in command_problems("data status --out x", parser)[0]  # a flag of another verb
    page = "Run `trace-gym eval --polcy base`.\n\n```bash\ntrace-gym rollout x \\\n    --seedz 0-3  # typo\n```\n"
    problems = [p for c in _commands_in(page) for p in command_problems(c, parser)]
    assert len(problems) == 2 and "--polcy" in problems[0] + problems[1] and "--seedz" in problems[0] + problems[1]
