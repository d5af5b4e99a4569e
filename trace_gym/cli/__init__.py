"""``trace-gym`` command line.  Each sub-command lives in its own module with
``register(subparsers)``; add the module name to ``COMMANDS`` to expose it.

One error path: a command signals a user error by raising :class:`UsageError` (exit 2: the
command line is wrong) or :class:`CommandError` (exit 1: the run failed); :func:`main` turns
those, argparse errors and any other exception into one ``error: ...`` line on stderr.
``--debug`` (anywhere on the command line, or ``TRACE_GYM_DEBUG=1``) shows the traceback instead.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

__all__ = ["main", "COMMANDS", "CommandError", "UsageError", "MAX_EPISODES", "check_count", "input_file",
           "check_policy_file", "writable_output", "removing_empty_output", "env_kwargs_arg"]

COMMANDS = [
    "trace_gym.cli.envs",
    "trace_gym.cli.play",
    # the TRACE loop, one verb per stage, in order (with --run DIR each finds what the one before wrote)
    "trace_gym.cli.rollout",
    "trace_gym.cli.analyze",
    "trace_gym.cli.synthesize",
    "trace_gym.cli.train",
    "trace_gym.cli.route",
    "trace_gym.cli.eval",
    # the rest
    "trace_gym.cli.calibrate",
    "trace_gym.cli.card",
    "trace_gym.cli.demo",
    "trace_gym.cli.compare",
    "trace_gym.cli.data",
    "trace_gym.cli.serve",
    "trace_gym.cli.conformance",
]


LOOP_HELP = """the TRACE loop by hand, one stage verb at a time, all in one run folder (each finds what the one
before wrote there, and resumes):
  1. trace-gym rollout ENV_ID --run DIR --policy SPEC   the model plays the target's tasks
  2. trace-gym analyze --run DIR                        the capabilities its failures lack
  3. trace-gym synthesize --run DIR                     one capability env each, calibrated on the model
  4. trace-gym sft --run DIR (or train --run DIR)       one LoRA adapter per capability env
  5. trace-gym route --run DIR                          the router: which adapter, or none, per conversation
  6. trace-gym eval --run DIR --policy base --policy routed --split test
`trace-gym VERB --help` says what each reads and writes; `trace-gym demo` runs the whole loop at once."""


class CommandError(Exception):
    """A user-facing failure: ``main`` prints ``error: <message>`` and exits with ``code`` (1)."""

    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self.code = code


class UsageError(CommandError):
    """The command line is wrong (a bad value, an unknown id or key): exit code 2."""

    def __init__(self, message: str):
        super().__init__(message, code=2)


# The most episodes (seeds, trials x tasks, samples x seeds) one command plans: a larger number is a typo,
# and planning it would exhaust memory before the first episode.
MAX_EPISODES = 1_000_000


def check_count(flag: str, value: int | None, low: int = 1, high: int = MAX_EPISODES) -> None:
    """Refuse ``value`` outside ``[low, high]`` for ``flag`` (``None``: not given, accepted)."""
    if value is None:
        return
    if value < low:
        raise UsageError(f"{flag} must be >= {low}, got {value}")
    if value > high:
        raise UsageError(f"{flag} must be <= {high:,}, got {value:,}")


def input_file(path: str | os.PathLike[str], what: str, hint: str = "") -> Path:
    """``path`` when it is an existing file, else a :class:`UsageError` that says what is there instead
    (``hint`` is added to a missing file's message, e.g. which command writes one)."""
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{path}: expected the {what}, got a folder")
    if not p.exists():
        raise UsageError(f"{what} not found: {path}{hint}")
    return p


def env_kwargs_arg(text: str | None, flag: str = "--env-kwargs") -> dict | None:
    """A flag's JSON object of ``gym.make`` keyword arguments (``None``: not given); else a :class:`UsageError`."""
    import json

    if not text:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{flag} is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise UsageError(f"{flag} must be a JSON object of gym.make keyword arguments")
    return value


def check_policy_file(spec: str) -> None:
    """A ``scripted:FILE`` policy spec whose FILE is missing or a folder: one clear :class:`UsageError`."""
    kind, sep, rest = spec.partition(":")
    if sep and kind == "scripted" and rest != "-":
        input_file(rest, "action script")


def writable_output(path: str | os.PathLike[str], flag: str) -> Path:
    """Check, before a long run, that ``path`` can be written: a scratch file is made and removed in its
    nearest existing folder, nothing else is created.  A :class:`CommandError` names the path as given."""
    import tempfile

    p = Path(path)
    if p.is_dir():
        raise CommandError(f"cannot write {flag} {path}: it is a folder")
    parent = p.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    try:
        if p.exists() and not os.access(p, os.W_OK):
            raise PermissionError(13, "permission denied")
        with tempfile.TemporaryFile(dir=parent):
            pass
    except OSError as exc:
        raise CommandError(f"cannot write {flag} {path}: {exc.strerror or exc}") from None
    return p


@contextlib.contextmanager
def removing_empty_output(path: str | os.PathLike[str] | None) -> Iterator[None]:
    """On a failure, remove the folder ``path`` (and parents the command created) when the command
    created it and it holds no file: a failed run leaves no empty output folder behind."""
    if not path:
        yield
        return
    out = Path(path).absolute()
    existing = out
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        yield
    except BaseException:
        if existing != out:
            _remove_empty_tree(out, stop=existing)
        raise


def _remove_empty_tree(folder: Path, stop: Path) -> None:
    if not folder.is_dir() or any(p.is_file() or p.is_symlink() for p in folder.rglob("*")):
        return
    for sub in sorted((p for p in folder.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        sub.rmdir()
    while folder != stop and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
        folder = folder.parent


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error (``error: ... (see trace-gym CMD --help)``), exit 2."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def build_parser() -> argparse.ArgumentParser:
    from trace_gym import __version__

    parser = _Parser(prog="trace-gym", description="Capability-targeted training environments for LLM agents.",
                     epilog=LOOP_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"trace-gym {__version__}")
    parser.add_argument("--debug", action="store_true", help="show the Python traceback of an error (anywhere on the line)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # command not present in this build
                continue
            raise
        mod.register(sub)
    return parser


def _flatten(text: str) -> str:
    """A possibly multi-line message as one line (``a:\n  b\n  c`` becomes ``a: b; c``)."""
    out = ""
    for ln in (ln.strip() for ln in text.splitlines()):
        if ln:
            out += ln if not out else (" " if out.endswith(":") else "; ") + ln
    return out


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, KeyError) and len(exc.args) == 1 and isinstance(exc.args[0], str):
        out = _flatten(exc.args[0])
    else:
        out = _flatten(str(exc))
    if not isinstance(exc, CommandError):
        name = type(exc).__name__
        out = f"{name}: {out}" if out else name
    return out or "failed"


def _usage_exception(exc: BaseException) -> bool:
    """Errors that mean the command line named something that does not exist or cannot work."""
    if isinstance(exc, UsageError):
        return True
    try:
        import gymnasium as gym

        if isinstance(exc, gym.error.Error):  # unknown env ids, bad make arguments
            return True
    except ImportError:  # pragma: no cover
        pass
    for modname, clsname in (("trace_gym.core.tasks", "TaskError"), ("trace_gym.train.config", "ConfigError")):
        mod = sys.modules.get(modname)
        cls = getattr(mod, clsname, None) if mod is not None else None
        if cls is not None and isinstance(exc, cls):
            return True
    return False


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # the libraries' own progress bars (a model's "Loading weights") would interleave with the commands' progress
    # lines and split an error from what came before; HF_HUB_DISABLE_PROGRESS_BARS=0 brings them back
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    debug = "--debug" in argv or os.environ.get("TRACE_GYM_DEBUG", "") not in ("", "0")
    argv = [a for a in argv if a != "--debug"]
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if not getattr(args, "func", None):
            parser.print_help(sys.stderr)
            return 2
        rc = args.func(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into a command that stopped reading (`| head`)
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115  (no flush error at exit)
        except OSError:
            pass
        return 1
    except SystemExit as exc:  # argparse's --help/--version, or a command's sys.exit
        if exc.code is None or isinstance(exc.code, int):
            return int(exc.code or 0)
        print(f"error: {_flatten(str(exc.code))}", file=sys.stderr)
        return 2
    except Exception as exc:
        if debug:
            raise
        code = exc.code if isinstance(exc, CommandError) else (2 if _usage_exception(exc) else 1)
        hint = "" if isinstance(exc, CommandError) else " (run with --debug for the traceback)"
        print(f"error: {_one_line(exc)}{hint}", file=sys.stderr)
        return code
    return int(rc or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
