"""Reading τ²-bench domain files: DBs, tool schemas, tasks, splits and policies.

Files are found under ``<data_dir>/tau2/domains/<domain>/`` (``data_dir`` defaults to
:func:`trace_gym.data.tau2_data_dir`).  Tasks stay plain dicts (the shape of
tasks.json) after a structural check whose errors name the file, the task and the
field, e.g. ``tasks.json: task '12' (index 11): evaluation_criteria.actions[0].name:
expected a string, got int``.
"""

from __future__ import annotations

import json
import tomllib
from functools import lru_cache
from pathlib import Path
from typing import Any

from trace_gym.data import DataDirError, tau2_data_dir

__all__ = [
    "DataDirError",
    "TaskFileError",
    "domain_dir",
    "load_policy",
    "load_splits",
    "load_tasks",
    "merge_update",
    "read_db_file",
    "read_tools_json",
    "tasks_in_split",
]

DOMAINS = ("mock", "airline", "retail", "telecom")


class TaskFileError(ValueError):
    """A domain file is malformed; the message names the file and the offending field."""


def domain_dir(domain: str, data_dir: str | Path | None = None) -> Path:
    """``<data_dir>/tau2/domains/<domain>`` (checked to exist)."""
    root = Path(data_dir) if data_dir is not None else tau2_data_dir()
    if not (root / "tau2" / "domains").is_dir() and (root / "domains").is_dir():
        folder = root / "domains" / domain  # pointed at the tau2 folder itself
    else:
        folder = root / "tau2" / "domains" / domain
    if not folder.is_dir():
        raise DataDirError(f"τ²-bench domain {domain!r} not found: no folder {folder}; see `trace-gym data status`")
    return folder


def _read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataDirError(f"missing τ²-bench data file {path}; see `trace-gym data status`") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise TaskFileError(f"{path}: invalid JSON: {exc}") from None


def read_db_file(path: Path) -> Any:
    """Parse a DB file (``.json`` or ``.toml``)."""
    if path.suffix == ".toml":
        try:
            with path.open("rb") as fh:
                return tomllib.load(fh)
        except FileNotFoundError:
            raise DataDirError(f"missing τ²-bench data file {path}; see `trace-gym data status`") from None
        except tomllib.TOMLDecodeError as exc:
            raise TaskFileError(f"{path}: invalid TOML: {exc}") from None
    data = _read_json(path)
    if not isinstance(data, dict):
        raise TaskFileError(f"{path}: expected a JSON object at the top level, got {type(data).__name__}")
    return data


def read_tools_json(path: Path) -> list[dict[str, Any]]:
    """tools.json / user_tools.json: ``[{name, tool_type, mutates_state, openai_schema}]``."""
    data = _read_json(path)
    if not isinstance(data, list):
        raise TaskFileError(f"{path}: expected a JSON list of tools")
    for i, t in enumerate(data):
        where = f"{path}: tool [{i}]"
        if not isinstance(t, dict):
            raise TaskFileError(f"{where}: expected an object")
        for key, typ in (("name", str), ("tool_type", str), ("openai_schema", dict)):
            if not isinstance(t.get(key), typ):
                raise TaskFileError(f"{where}: field {key!r} missing or not a {typ.__name__}")
        if t["tool_type"] not in ("read", "write", "generic", "think"):
            raise TaskFileError(f"{where}: tool_type {t['tool_type']!r} is not read|write|generic|think")
        fn = t["openai_schema"].get("function")
        if not isinstance(fn, dict) or fn.get("name") != t["name"]:
            raise TaskFileError(f"{where}: openai_schema.function.name does not match name {t['name']!r}")
    return data


def merge_update(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """Recursive dict update (nested dicts merge; anything else replaces), in place; returns ``base``."""
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merge_update(base[key], value)
        else:
            base[key] = json.loads(json.dumps(value)) if isinstance(value, (dict, list)) else value
    return base


# --------------------------------------------------------------------------- tasks


def _type_name(v: Any) -> str:
    return "null" if v is None else type(v).__name__


def _expect(cond: bool, where: str, msg: str) -> None:
    if not cond:
        raise TaskFileError(f"{where}: {msg}")


def _check_str(v: Any, where: str, field: str, optional: bool = False) -> None:
    if optional and v is None:
        return
    _expect(isinstance(v, str), where, f"{field}: expected a string, got {_type_name(v)}")


def _check_list(v: Any, where: str, field: str) -> list[Any]:
    if v is None:
        return []
    _expect(isinstance(v, list), where, f"{field}: expected a list, got {_type_name(v)}")
    return v


def _check_dict(v: Any, where: str, field: str, optional: bool = True) -> dict[str, Any]:
    if v is None and optional:
        return {}
    _expect(isinstance(v, dict), where, f"{field}: expected an object, got {_type_name(v)}")
    return v


_REWARD_BASIS = {"DB", "ENV_ASSERTION", "NL_ASSERTION", "ACTION", "COMMUNICATE", "NL_ASSERTIONS"}


def _check_function_call(fc: Any, where: str, field: str, assertion: bool = False) -> None:
    _check_dict(fc, where, field, optional=False)
    _expect(fc.get("env_type") in ("user", "assistant"), where,
            f"{field}.env_type: expected 'user' or 'assistant', got {fc.get('env_type')!r}")
    _check_str(fc.get("func_name"), where, f"{field}.func_name")
    _check_dict(fc.get("arguments"), where, f"{field}.arguments")
    if assertion and "assert_value" in fc:
        _expect(isinstance(fc["assert_value"], bool), where, f"{field}.assert_value: expected a bool")


def _check_message(m: Any, where: str, field: str) -> None:
    _check_dict(m, where, field, optional=False)
    role = m.get("role")
    _expect(role in ("user", "assistant", "tool", "system"), where, f"{field}.role: unknown role {role!r}")
    if role == "tool":
        _check_str(m.get("id"), where, f"{field}.id")
        _check_str(m.get("content"), where, f"{field}.content", optional=True)
    for j, tc in enumerate(_check_list(m.get("tool_calls"), where, f"{field}.tool_calls")):
        f = f"{field}.tool_calls[{j}]"
        _check_dict(tc, where, f, optional=False)
        _check_str(tc.get("name"), where, f"{f}.name")
        _check_dict(tc.get("arguments"), where, f"{f}.arguments")


def check_task(task: Any, where: str) -> None:
    """Raise :class:`TaskFileError` if ``task`` does not have tasks.json's structure."""
    _check_dict(task, where, "task", optional=False)
    _check_str(task.get("id"), where, "id")
    us = _check_dict(task.get("user_scenario"), where, "user_scenario", optional=False)
    ins = us.get("instructions")
    _expect(isinstance(ins, (str, dict)), where, f"user_scenario.instructions: expected a string or object, got {_type_name(ins)}")
    _check_str(task.get("ticket"), where, "ticket", optional=True)
    ist = _check_dict(task.get("initial_state"), where, "initial_state")
    if ist:
        init_data = _check_dict(ist.get("initialization_data"), where, "initial_state.initialization_data")
        for side in ("agent_data", "user_data"):
            _check_dict(init_data.get(side), where, f"initial_state.initialization_data.{side}")
        for i, a in enumerate(_check_list(ist.get("initialization_actions"), where, "initial_state.initialization_actions")):
            _check_function_call(a, where, f"initial_state.initialization_actions[{i}]")
        for i, m in enumerate(_check_list(ist.get("message_history"), where, "initial_state.message_history")):
            _check_message(m, where, f"initial_state.message_history[{i}]")
    ec = _check_dict(task.get("evaluation_criteria"), where, "evaluation_criteria")
    for i, a in enumerate(_check_list(ec.get("actions"), where, "evaluation_criteria.actions")):
        f = f"evaluation_criteria.actions[{i}]"
        _check_dict(a, where, f, optional=False)
        _check_str(a.get("name"), where, f"{f}.name")
        _check_dict(a.get("arguments"), where, f"{f}.arguments")
        if a.get("requestor") is not None:
            _expect(a["requestor"] in ("user", "assistant"), where, f"{f}.requestor: expected 'user' or 'assistant'")
        if a.get("compare_args") is not None:
            ca = _check_list(a["compare_args"], where, f"{f}.compare_args")
            _expect(all(isinstance(x, str) for x in ca), where, f"{f}.compare_args: expected a list of strings")
    for i, a in enumerate(_check_list(ec.get("env_assertions"), where, "evaluation_criteria.env_assertions")):
        _check_function_call(a, where, f"evaluation_criteria.env_assertions[{i}]", assertion=True)
    for key in ("communicate_info", "nl_assertions"):
        items = _check_list(ec.get(key), where, f"evaluation_criteria.{key}")
        _expect(all(isinstance(x, str) for x in items), where, f"evaluation_criteria.{key}: expected a list of strings")
    basis = _check_list(ec.get("reward_basis"), where, "evaluation_criteria.reward_basis")
    for b in basis:
        _expect(b in _REWARD_BASIS, where, f"evaluation_criteria.reward_basis: unknown component {b!r}")


@lru_cache(maxsize=16)
def _load_tasks_cached(path: str) -> tuple[dict[str, Any], ...]:
    p = Path(path)
    data = _read_json(p)
    if not isinstance(data, list):
        raise TaskFileError(f"{p}: expected a JSON list of tasks, got {_type_name(data)}")
    seen: set[str] = set()
    for i, task in enumerate(data):
        tid = task.get("id") if isinstance(task, dict) else None
        where = f"{p}: task {tid!r} (index {i})" if isinstance(tid, str) else f"{p}: task at index {i}"
        check_task(task, where)
        _expect(tid not in seen, where, f"id: duplicate task id {tid!r}")
        seen.add(tid)  # type: ignore[arg-type]
    return tuple(data)


def load_tasks(domain: str, data_dir: str | Path | None = None, split: str | None = None) -> list[dict[str, Any]]:
    """The domain's tasks (plain dicts, tasks.json order); ``split`` filters by split_tasks.json.

    The returned dicts are shared with a cache: do not mutate them.
    """
    folder = domain_dir(domain, data_dir)
    tasks = list(_load_tasks_cached(str(folder / "tasks.json")))
    if split is None:
        return tasks
    return tasks_in_split(tasks, load_splits(domain, data_dir), split)


def tasks_in_split(tasks: list[dict[str, Any]], splits: dict[str, list[str]], split: str) -> list[dict[str, Any]]:
    if split not in splits:
        raise ValueError(f"Invalid task split name: {split}. Valid splits are: {list(splits)}")
    wanted = set(splits[split])
    return [t for t in tasks if t["id"] in wanted]


def load_splits(domain: str, data_dir: str | Path | None = None) -> dict[str, list[str]]:
    path = domain_dir(domain, data_dir) / "split_tasks.json"
    data = _read_json(path)
    _expect(isinstance(data, dict), str(path), "expected an object mapping split names to id lists")
    for name, ids in data.items():
        _expect(isinstance(ids, list) and all(isinstance(x, str) for x in ids), str(path),
                f"split {name!r}: expected a list of task id strings")
    return data


def load_policy(domain: str, solo_mode: bool = False, data_dir: str | Path | None = None, workflow: bool = False) -> str:
    """The domain policy text as tau2 composes it (protocol.json ``policy_composition``)."""
    folder = domain_dir(domain, data_dir)

    def read(name: str) -> str:
        try:
            return (folder / name).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise DataDirError(f"missing τ²-bench data file {folder / name}; see `trace-gym data status`") from None

    if domain == "telecom":
        main = read("main_policy_solo.md" if solo_mode else "main_policy.md")
        if workflow:
            tech = read("tech_support_workflow_solo.md" if solo_mode else "tech_support_workflow.md")
        else:
            tech = read("tech_support_manual.md")
        return f"<main_policy>\n{main}\n</main_policy>\n<tech_support_policy>\n{tech}\n</tech_support_policy>"
    if solo_mode:
        if not (folder / "policy_solo.md").is_file():
            raise ValueError(f"{domain.capitalize()} domain does not support solo mode")
        return read("policy_solo.md")
    return read("policy.md")
