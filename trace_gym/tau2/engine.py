"""τ²-bench tool engine: one episode's environment, tool dispatch and tau2's result texts.

:class:`Tau2Environment` gives tau2 1.0.1's ``Environment`` semantics (``get_response``,
``set_state``, env functions and assertions, DB hashes) on this package's state model.
It is built from three parts, each in its own module:

* :mod:`trace_gym.tau2.domain_spec` — what a domain declares and how its data is loaded
  (:class:`DomainSpec`, :class:`DomainData`, :func:`load_domain`; read its docstring to
  add a domain);
* :mod:`trace_gym.tau2.toolkit` — the tool collections (:class:`Toolkit`, ``@tool``)
  and result rendering (:class:`Model`, :func:`to_json_str`);
* :mod:`trace_gym.tau2.db` — the copy-on-write database state (:class:`BaseDb`,
  :class:`DbState`).

The domain's own database is the default; a different one (e.g. a synthetic database
in the same layout) is injected through the constructor's ``db`` argument.

State model
===========

A :class:`DomainData` (cached per domain and data folder) holds the immutable base
DBs.  A :class:`DbState` starts as a view on the base and copies only what a write
touches.  Every tool call is a transaction: if the tool raises, the records it
touched are restored, so a failed call never changes state (tau2 itself never
changes state on the error paths its corpus exercises).  Call arguments are deep-copied
before dispatch, so the state never shares objects with the caller.

``DbState.version`` (and ``Tau2Environment.state_version``) changes on every
committed change and is restored by a rollback, so two equal versions mean the same
state.  Hashes are memoised per version: hashing an unchanged state is free, and a
changed 7 MB airline state costs one join plus one sha256.  Likewise the result text of
a tool that returns an unchanged base record (or a list of them) is serialised once per
base database and reused (:meth:`BaseDb.model_text`).

Deliberate divergence from tau2: a failed call is rolled back even where tau2 would
keep a partial change, and airline ``cancel_reservation`` refuses once a repeated
cancellation would double the payment history past 4096 entries.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from trace_gym.core.tools import ToolResult

from .data import merge_update
from .db import BaseDb, DbState, clone
from .domain_spec import DomainData, DomainSpec, load_domain
from .toolkit import Model, Toolkit, to_json_str, tool

__all__ = [
    "BaseDb",
    "DbState",
    "DomainData",
    "DomainSpec",
    "Model",
    "Tau2Environment",
    "Toolkit",
    "ToolResult",
    "clone",
    "corpus_uuid_source",
    "load_domain",
    "to_json_str",
    "tool",
]


# --------------------------------------------------------------------------- ids


def corpus_uuid_source() -> Callable[[], str]:
    """The deterministic uuid4 replacement the conformance corpus used: n-th call ->
    ``sha256(f"tau2-corpus-uuid4:{n}")`` hex (32 digits), per environment."""
    counter = iter(range(1 << 62))

    def next_hex() -> str:
        return hashlib.sha256(f"tau2-corpus-uuid4:{next(counter)}".encode()).hexdigest()[:32]

    return next_hex


# --------------------------------------------------------------------------- environment


class Tau2Environment:
    """One episode's τ²-bench environment: tau2's ``Environment`` semantics on our state model.

    Construction is cheap (domain data is cached; no DB copy), so build a fresh one
    per episode.
    """

    def __init__(
        self,
        domain: str | DomainData,
        *,
        solo_mode: bool = False,
        data_dir: str | Path | None = None,
        uuid_source: Callable[[], str] | None = None,
        db: dict[str, Any] | BaseDb | None = None,
    ):
        """Start on the domain's database, or on ``db`` when given (the agent-side database is
        injected; the user side, if any, stays the domain's):

        * a dict in the data file's layout (e.g. a synthetic database) is normalised like
          the data file and never mutated;
        * a :class:`BaseDb` — typically :attr:`base` of another environment — is shared
          as is, so starting another episode on the same data costs no copy.

        The data folder is still read for the tool schemas: a missing folder or file
        raises :class:`~trace_gym.data.DataDirError`.
        """
        self.data = domain if isinstance(domain, DomainData) else load_domain(domain, data_dir)
        self.spec = self.data.spec
        if solo_mode and self.spec.solo_error is not None:
            raise ValueError(self.spec.solo_error)
        self.solo_mode = solo_mode
        self.new_uuid_hex: Callable[[], str] = uuid_source or corpus_uuid_source()
        if db is None:
            base = self.data.db
        elif isinstance(db, BaseDb):
            base = db
        else:
            base = self.data.base_from(self.spec.normalise_db(db))
        self.base: BaseDb = base
        """The immutable agent database this environment started from (``base.data`` is its
        canonical content; pass it as ``db=`` to start another environment on it)."""
        self.db = DbState(base)
        self.user_db: DbState | None = DbState(self.data.user_db) if self.data.user_db is not None else None
        self.tools = self.spec.tools_cls(self, self.db)
        self.user_tools: Toolkit | None = (
            self.spec.user_tools_cls(self, self.user_db)  # type: ignore[arg-type]
            if self.spec.user_tools_cls is not None and self.user_db is not None
            else None
        )
        if solo_mode and self.user_tools is not None:
            overlap = set(self.tools.TOOL_KINDS) & set(self.user_tools.TOOL_KINDS)
            if overlap:
                raise ValueError(f"Tool names overlap: {overlap}")
        self._synced: tuple[Any, ...] | None = None  # the state the last sync left (see :meth:`sync_tools`)
        self.sync_tools()

    # ---- schemas and kinds
    @property
    def domain(self) -> str:
        return self.spec.name

    def agent_tool_schemas(self) -> list[dict[str, Any]]:
        """The agent tools' ``openai_schema`` exactly as in tools.json, in order."""
        return [t["openai_schema"] for t in self.data.tools]

    def user_tool_schemas(self) -> list[dict[str, Any]]:
        """The user tools' ``openai_schema`` exactly as in user_tools.json, in order."""
        return [t["openai_schema"] for t in self.data.user_tools]

    def has_tool(self, name: str) -> bool:
        return self.data.tool_kind(name) is not None

    def tool_kind(self, name: str) -> str | None:
        """``read|write|generic|think`` for a known tool, else ``None``."""
        return self.data.tool_kind(name)

    def mutates_state(self, name: str) -> bool:
        """Whether replay re-executes the tool (tau2 assumes True for unknown names)."""
        kind = self.tool_kind(name)
        return True if kind is None else kind == "write"

    # ---- calls
    def _dispatch(self, name: str, requestor: str, arguments: dict[str, Any]) -> Any:
        if requestor == "user":
            if self.solo_mode:
                raise ValueError("User tool calls are not allowed in solo mode")
            return self._use(self.user_tools, name, arguments, user=True)
        if requestor == "assistant":
            if self.solo_mode and self.user_tools is not None and self.user_tools.has_tool(name):
                return self._use(self.user_tools, name, arguments, user=True)
            return self._use(self.tools, name, arguments, user=False)
        raise ValueError(f"Invalid requestor: {requestor}")

    def _use(self, kit: Toolkit | None, name: str, arguments: dict[str, Any], user: bool) -> Any:
        if kit is None:
            raise ValueError("User tools not available" if user else "Tools not available")
        if not kit.has_tool(name):
            raise ValueError(f"Tool '{name}' not found.")
        return getattr(kit, name)(**arguments)

    def _begin(self) -> None:
        self.db.begin()
        if self.user_db is not None and self.user_db is not self.db:
            self.user_db.begin()

    def _commit(self) -> None:
        self.db.commit()
        if self.user_db is not None and self.user_db is not self.db:
            self.user_db.commit()

    def _rollback(self) -> None:
        self.db.rollback()
        if self.user_db is not None and self.user_db is not self.db:
            self.user_db.rollback()

    def make_tool_call(self, name: str, arguments: dict[str, Any] | None = None, requestor: str = "assistant") -> Any:
        """Run a tool and return its raw value; raises on failure (no sync, as in tau2).

        A failing call leaves the state unchanged.
        """
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise TypeError(f"arguments must be a JSON object, got {type(arguments).__name__}")
        arguments = clone(arguments) if arguments else {}  # the state must never share objects with the caller's arguments
        db, user_db = self.db, self.user_db
        if user_db is db:
            user_db = None
        db.begin()
        if user_db is not None:
            user_db.begin()
        try:
            if requestor == "assistant" and not self.solo_mode:  # the usual call: tau2's _dispatch, inlined
                kit = self.tools
                if name not in kit.TOOL_KINDS:
                    raise ValueError(f"Tool '{name}' not found.")
                value = getattr(kit, name)(**arguments)
            else:
                value = self._dispatch(name, requestor, arguments)
        except BaseException:
            self._rollback()
            raise
        db.commit()
        if user_db is not None:
            user_db.commit()
        return value

    def get_response(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        requestor: str = "assistant",
        call_id: str | None = None,
    ) -> ToolResult:
        """tau2's ``get_response``: call, sync, and format (``Error: ...`` on any exception)."""
        try:
            value = self.make_tool_call(name, arguments, requestor)
            if self.spec.sync is not None:
                self.sync_tools()
        except Exception as exc:  # every failure becomes an error result, as in tau2
            return ToolResult(f"Error: {exc}", True)
        try:
            return ToolResult(self._result_text(value), False)
        except Exception as exc:
            return ToolResult(f"Error: {exc}", True)

    def _result_text(self, value: Any) -> str:
        """``to_json_str(value)``, reusing the cached text of unchanged database records for a
        model or a list of models (the usual results of read tools)."""
        if isinstance(value, Model):
            return self._model_text(value.data)
        if isinstance(value, list) and value and all(isinstance(v, Model) for v in value):
            # json.dumps of a list joins its items' texts with ", "
            return "[" + ", ".join(self._model_text(v.data) for v in value) + "]"
        return to_json_str(value)

    def _model_text(self, data: Any) -> str:
        text = self.db._base.model_text(data)
        if text is None and self.user_db is not None and self.user_db is not self.db:
            text = self.user_db._base.model_text(data)
        return json.dumps(data, default=str) if text is None else text

    def _state_key(self) -> tuple[Any, ...]:
        u = self.user_db
        return (self.db, self.db.version, u, 0 if u is None else u.version)

    def sync_tools(self) -> None:
        """Run the domain's ``sync`` — unless the state is still the one the last sync left.

        A sync is a function of the databases that leaves them synced (running it twice in a
        row changes nothing), and every change to a database changes its version, so a state
        seen right after a sync needs none.
        """
        sync = self.spec.sync
        if sync is None or self._state_key() == self._synced:
            return
        sync(self)
        self._synced = self._state_key()

    # ---- env functions / assertions
    def _kit(self, env_type: str) -> Toolkit:
        if env_type == "user":
            kit = self.user_tools
        elif env_type == "assistant":
            kit = self.tools
        else:
            raise ValueError(f"Invalid environment type: {env_type}")
        if kit is None:
            raise AttributeError(f"'NoneType' object has no attribute {env_type!r}")
        return kit

    def run_env_function_call(self, func_name: str, arguments: dict[str, Any] | None = None, env_type: str = "assistant") -> Any:
        """Run a toolkit method by name (tool or helper) and sync, as tau2 does for init actions."""
        fn = self._kit(env_type).env_function(func_name)
        self._begin()
        try:
            res = fn(**(arguments or {}))
        except BaseException:
            self._rollback()
            raise
        self._commit()
        self.sync_tools()
        return res

    def run_env_assertion(
        self, func_name: str, arguments: dict[str, Any] | None = None, env_type: str = "assistant",
        assert_value: bool | None = None,
    ) -> bool:
        """Run an assertion function; returns its bool result, or ``result == assert_value`` when given.

        Exceptions raised by the function propagate (tau2's ``evaluation_error``).
        """
        res = self.run_env_function_call(func_name, arguments, env_type)
        if not isinstance(res, bool):
            raise ValueError(f"Function {func_name} returned {type(res)} instead of bool")
        return res if assert_value is None else res == assert_value

    # ---- state
    def set_state(
        self,
        initialization_data: dict[str, Any] | None = None,
        initialization_actions: Iterable[dict[str, Any]] | None = None,
        message_history: Iterable[dict[str, Any]] | None = None,
        strict: bool = True,
    ) -> None:
        """Apply a task's ``initial_state`` the way tau2's ``Environment.set_state`` does.

        * ``initialization_data``: ``{"agent_data": {...}, "user_data": {...}}`` merged
          (recursively for dicts) into the DBs; as in tau2, the other side's DB then
          becomes the very same object.
        * ``initialization_actions``: ``[{"env_type", "func_name", "arguments"}, ...]``.
        * ``message_history``: messages in tau2 form (``role``, ``tool_calls`` with
          ``id/name/arguments/requestor``, tool messages with ``id`` and ``content``) or
          OpenAI form; only mutating tool calls are replayed, unknown names skipped, and a
          replayed output that differs from the recorded one raises ``ValueError``.
        """
        if self.solo_mode:
            for m in message_history or ():
                if m.get("role") == "user":
                    raise AssertionError("User messages are not allowed in solo mode")
        if initialization_data:
            agent_data = initialization_data.get("agent_data")
            user_data = initialization_data.get("user_data")
            if agent_data is not None:
                merged = self.spec.normalise_db(merge_update(self.db.to_dict(), agent_data))
                self.db = DbState(self.data.base_from(merged))
                self.tools.db = self.db
                if self.user_tools is not None:
                    self.user_db = self.db
                    self.user_tools.db = self.db
            if user_data is not None:
                if self.user_tools is None or self.user_db is None or self.spec.normalise_user_db is None:
                    raise AttributeError("'NoneType' object has no attribute 'update_db'")
                if self.user_db is self.db:  # already aliased to the agent DB: tau2 revalidates it as that model
                    merged = self.spec.normalise_db(merge_update(self.db.to_dict(), user_data))
                    self.user_db = DbState(self.data.base_from(merged))
                else:
                    merged = self.spec.normalise_user_db(merge_update(self.user_db.to_dict(), user_data))
                    self.user_db = DbState(self.data.base_from(merged, user=True))
                self.user_tools.db = self.user_db
                self.db = self.user_db
                self.tools.db = self.user_db
        for action in initialization_actions or ():
            self.run_env_function_call(action["func_name"], action.get("arguments") or {}, action.get("env_type", "assistant"))
        for call, expected in _tool_pairs(message_history or ()):
            if not self.has_tool(call["name"]) or not self.mutates_state(call["name"]):
                continue
            res = self.get_response(call["name"], call.get("arguments") or {}, call.get("requestor", "assistant"), call.get("id"))
            if strict and _loads(res.content) != _loads(expected.get("content")):
                raise ValueError(
                    f"Tool call:\n{call}\n\nReturned:\n{res.content}\n\nExpected:\n{expected.get('content')}"
                )
        self.sync_tools()

    # ---- inspection
    def hashes(self) -> dict[str, str | None]:
        """``db_hash``, ``user_db_hash`` (tau2's own), and the two canonical sha256s."""
        u = self.user_db
        return {
            "db_hash": self.db.hash("tau2"),
            "user_db_hash": u.hash("tau2") if u is not None else None,
            "db_canonical_sha256": self.db.hash("canonical"),
            "user_db_canonical_sha256": u.hash("canonical") if u is not None else None,
        }

    def get_db_hash(self) -> str:
        return self.db.hash("tau2")

    def get_user_db_hash(self) -> str | None:
        return self.user_db.hash("tau2") if self.user_db is not None else None

    def canonical_db(self) -> dict[str, Any]:
        """The agent DB as canonical plain JSON (a fresh deep copy)."""
        return self.db.to_dict()

    def canonical_user_db(self) -> dict[str, Any] | None:
        return self.user_db.to_dict() if self.user_db is not None else None

    def same_state(self, other: Tau2Environment) -> bool:
        """tau2's ``db_match``: equal agent DB and equal user DB (cheap for states of one base)."""
        if (self.user_db is None) != (other.user_db is None):
            return False
        if not self.db.same_content(other.db):
            return False
        return self.user_db is None or self.user_db.same_content(other.user_db)  # type: ignore[arg-type]

    @property
    def state_version(self) -> tuple[int, int]:
        """Changes whenever either DB changes (cheap state comparison between steps)."""
        return (self.db.version, self.user_db.version if self.user_db is not None else 0)


def _loads(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _norm_call(tc: dict[str, Any], requestor: str) -> dict[str, Any]:
    if "function" in tc:  # OpenAI form
        fn = tc["function"]
        args = fn.get("arguments")
        if isinstance(args, str):
            args = json.loads(args) if args.strip() else {}
        return {"id": tc.get("id"), "name": fn.get("name"), "arguments": args or {}, "requestor": requestor}
    out = dict(tc)
    out.setdefault("requestor", requestor)
    return out


def _tool_pairs(messages: Iterable[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(tool call, tool message) pairs of a history, checked as tau2 checks them."""
    pending = list(messages)[::-1]
    pairs = []
    while pending:
        msg = pending.pop()
        role = msg.get("role")
        if role == "tool":
            raise ValueError("Tool message not expected. Tool messages should always follow a tool call.")
        calls = msg.get("tool_calls") or []
        if role not in ("assistant", "user") or not calls:
            continue
        for tc in calls:
            call = _norm_call(tc, "user" if role == "user" else "assistant")
            if not pending:
                raise ValueError("Tool message expected. Got None.")
            tm = pending.pop()
            if tm.get("role") != "tool":
                raise ValueError(f"Tool message expected. Got {tm.get('role')}")
            tm_id = tm.get("id", tm.get("tool_call_id"))
            if call.get("id") != tm_id:
                raise ValueError(f"Tool call id mismatch. Got {call.get('id')} and {tm_id}")
            pairs.append((call, tm))
    return pairs
