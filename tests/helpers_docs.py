"""Reading the pages' code for tests/test_docs.py: the command lines they show and their Python blocks, and
parsing a command line with the real argument parser of the program it runs.

A command is ``trace-gym ...`` (or ``-m trace_gym.cli ...``), or ``python SCRIPT.py ...`` for a script of
``benchmarks/``, ``examples/`` or ``scripts/`` (also written bare, ``trace_vs_baselines.py --swap``).  A script's
parser is the one it builds when run: the script is run with ``parse_known_args`` intercepted, so the parser is
captured before the script does anything else.  That runs the scripts' imports, so it happens in a child process:
``python -m tests.helpers_docs`` reads the script commands as JSON on stdin and prints the problems as JSON.

Placeholders (``...``, ``[--opt]``, ``FILE``, ``<name>``, ``A-B``) stand for a value of the reader's: one given to
an option that parses an int, a float or a fixed choice is replaced by a valid one, so that only the values
written out are checked.  A command quoted inline may leave out required arguments (it names a command); one
in a shell block must be complete.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import runpy
import shlex
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT_DIRS = ("benchmarks", "examples", "scripts")
SHELL = ("", "bash", "sh", "shell", "console")

FENCE = re.compile(r"^(```|~~~)(.*?)\n(.*?)^\1[ \t]*$", re.S | re.M)
INLINE = re.compile(r"(`+)(.+?)\1", re.S)
PLACEHOLDER = re.compile(r"\.\.\.|…|<[^<>]+>|[A-Z][A-Z0-9_]*(?:[-.=#:/][A-Za-z0-9_]+)*")
REQUIRES = re.compile(r"\A# requires: (.+)$", re.M)  # the first line of a Python block that is not run


@dataclass(frozen=True)
class Command:
    program: str  # "trace-gym", or a script's path relative to the repository
    args: str
    inline: bool  # quoted inline (may leave out required arguments), else in a shell block
    where: str

    def __str__(self) -> str:
        return f"{self.where}: `{self.program} {self.args}`".rstrip()


# --- finding commands ---------------------------------------------------------------------------------------

def script_path(name: str) -> str | None:
    """The repository path of a script named as written (``benchmarks/x.py`` or a bare ``x.py``), or None."""
    if name.startswith(tuple(f"{d}/" for d in SCRIPT_DIRS)):
        return name if (ROOT / name).is_file() else None
    if "/" in name:
        return None
    found = [p for d in SCRIPT_DIRS for p in (ROOT / d).rglob(name)]
    return str(found[0].relative_to(ROOT)) if len(found) == 1 else None


def _parts(line: str, inline: bool, where: str) -> list[Command]:
    out = []
    for part in re.split(r"\|\||&&|[|;]", line):
        m = re.search(r"(?:^|\s|\$ )(?:trace-gym|-m trace_gym\.cli)(?:\s+(.*)|$)", part)
        if m:
            out.append(Command("trace-gym", (m.group(1) or "").strip(), inline, where))
            continue
        m = re.match(r"\s*(?:\$ )?(?:python[\d.]*\s+)?([\w./-]+\.py)(?:\s+(.*)|\s*$)", part)
        path = script_path(m.group(1)) if m else None
        if path:
            out.append(Command(path, (m.group(2) or "").strip(), inline, where))
    return out


def commands_in(text: str, page: str = "") -> list[Command]:
    """Every command line written in a page: from shell code blocks (continuations joined, comments dropped)
    and from inline code spans."""
    found = []
    for m in FENCE.finditer(text):
        if m.group(2).strip() not in SHELL:
            continue
        line_no = text.count("\n", 0, m.start()) + 2
        for i, line in enumerate(m.group(3).replace("\\\n", " ").splitlines()):
            line = re.sub(r"(^|\s)#.*$", "", line).strip()
            found += _parts(line, False, f"{page}:{line_no + i}")
    outside = FENCE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    for m in INLINE.finditer(outside):
        found += _parts(" ".join(m.group(2).split()), True, f"{page}:{outside.count(chr(10), 0, m.start()) + 1}")
    return found


def python_blocks(text: str) -> list[tuple[int, str, str | None]]:
    """``(first line of the code, code, why it is not run or None)`` for every ```` ```python ```` block."""
    out = []
    for m in FENCE.finditer(text):
        if m.group(2).strip() == "python":
            requires = REQUIRES.match(m.group(3))
            out.append((text.count("\n", 0, m.start()) + 2, m.group(3), requires.group(1) if requires else None))
    return out


# --- parsing a command line -----------------------------------------------------------------------------------

class _ParseError(Exception):
    pass


def _raise(self: argparse.ArgumentParser, message: str) -> None:
    raise _ParseError(message)


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def _sample(action: argparse.Action | None, token: str) -> str:
    """A valid value for ``action`` in place of the placeholder ``token``."""
    if action is None or action.nargs == 0:
        return token
    if action.choices:
        return str(next(iter(action.choices)))
    if action.type is int:
        return "1"
    if action.type is float:
        return "0.5"
    return token


def _fill_placeholders(tokens: list[str], parser: argparse.ArgumentParser) -> list[str]:
    """``tokens`` with each placeholder that an option parses into an int, a float or a choice made valid."""
    current, out = parser, []
    for i, t in enumerate(tokens):
        sub = _subparsers(current)
        if sub is not None and t in sub.choices and all(not x.startswith("-") for x in tokens[:i]):
            current = sub.choices[t]
        if "=" in t and t.startswith("--"):
            flag, _, value = t.partition("=")
            if PLACEHOLDER.fullmatch(value):
                t = f"{flag}={_sample(current._option_string_actions.get(flag), value)}"
        elif PLACEHOLDER.fullmatch(t) and i > 0 and tokens[i - 1].startswith("-"):
            t = _sample(current._option_string_actions.get(tokens[i - 1]), t)
        out.append(t)
    return out


def parse_problem(parser: argparse.ArgumentParser, args: str, inline: bool) -> str | None:
    """What the parser refuses in ``args`` (None when it accepts them); nothing is run."""
    try:
        tokens = shlex.split(args)
    except ValueError as exc:
        return f"cannot split ({exc})"
    tokens = [t.strip("[]") for t in tokens if t.strip("[]") not in ("", "...", "…")]
    tokens = _fill_placeholders(tokens, parser)
    sub = _subparsers(parser)
    if tokens and sub is not None and (PLACEHOLDER.fullmatch(tokens[0]) and tokens[0] not in sub.choices):
        return None  # a placeholder command (`trace-gym VERB`, `trace-gym <command>`)
    # First with nothing required, so that a wrong flag or value is found even where an argument is missing; then,
    # for a command in a shell block, as written.
    for optional in (True, False) if not inline else (True,):
        problem = _parse(parser, tokens, optional)
        if problem:
            return problem
    return None


def _actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    sub = _subparsers(parser)
    return parser._actions + [a for p in (sub.choices.values() if sub else ()) for a in _actions(p)]


def _parse(parser: argparse.ArgumentParser, tokens: list[str], optional: bool) -> str | None:
    out, err = io.StringIO(), io.StringIO()
    saved_error, saved_required = argparse.ArgumentParser.error, [(a, a.required) for a in _actions(parser)]
    argparse.ArgumentParser.error = _raise  # a script's parser raises instead of exiting (the CLI's always does)
    if optional:
        for a, _ in saved_required:
            a.required = False
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            parser.parse_args(tokens)
    except SystemExit as exc:  # --help, --version
        return None if not exc.code else f"exit {exc.code}: {err.getvalue().strip()}"
    except Exception as exc:  # noqa: BLE001  (_ParseError, the CLI's UsageError)
        return str(exc)
    finally:
        argparse.ArgumentParser.error = saved_error
        for a, required in saved_required:
            a.required = required
    return None


# --- scripts' parsers (run in a child process) ---------------------------------------------------------------

class _Captured(BaseException):  # a BaseException, so that no `except Exception` in a script swallows it
    def __init__(self, parser: argparse.ArgumentParser):
        super().__init__()
        self.parser = parser


def script_parser(path: Path) -> argparse.ArgumentParser | None:
    """The parser ``path`` builds when run as a program, or None for a script without one (it takes no
    arguments).  The script runs until it first parses its command line, and no further."""
    if "ArgumentParser" not in path.read_text(encoding="utf-8"):
        return None

    def grab(self: argparse.ArgumentParser, args: object = None, namespace: object = None) -> None:
        raise _Captured(self)

    saved_parse, saved_argv, saved_path = argparse.ArgumentParser.parse_known_args, sys.argv, list(sys.path)
    argparse.ArgumentParser.parse_known_args = grab
    sys.argv = [str(path)]
    sys.path.insert(0, str(path.parent))  # as `python path` has it
    try:
        runpy.run_path(str(path), run_name="__main__")
    except _Captured as captured:
        return captured.parser
    finally:
        argparse.ArgumentParser.parse_known_args, sys.argv = saved_parse, saved_argv
        sys.path[:] = saved_path
    raise RuntimeError(f"{path} builds an ArgumentParser but ran to its end without parsing its command line")


def script_problems(commands: list[Command]) -> list[str]:
    """What each script's own parser refuses in the commands (run in this process)."""
    parsers: dict[str, argparse.ArgumentParser | None] = {}
    problems = []
    for c in commands:
        if c.program not in parsers:
            parsers[c.program] = script_parser(ROOT / c.program)
        parser = parsers[c.program]
        if parser is None:
            problem = f"{c.program} takes no arguments" if c.args.strip() else None
        else:
            problem = parse_problem(parser, c.args, c.inline)
        if problem:
            problems.append(f"{c}: {problem}")
    return problems


def to_json(commands: list[Command]) -> str:
    """The commands as the child process reads them on stdin."""
    return json.dumps([asdict(c) for c in commands])


if __name__ == "__main__":
    todo = [Command(**c) for c in json.load(sys.stdin)]
    with contextlib.redirect_stdout(io.StringIO()):  # a script's imports may print
        found = script_problems(todo)
    print(json.dumps(found))
