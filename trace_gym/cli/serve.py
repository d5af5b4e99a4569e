"""``trace-gym serve ENV_ID``: run a registered env as an OpenEnv server (needs the ``openenv`` extra).

    trace-gym serve trace/cap-refund-policy-v0 --port 8000 --max-sessions 64

Each WebSocket session gets its own env instance (one episode at a time); OpenEnv's
client (``trace_gym.integrations.openenv.TraceEnvClient``) talks to it.  The server binds
127.0.0.1 unless ``--host`` says otherwise; a session silent for ``--idle-timeout`` seconds is
closed; Ctrl-C (or SIGTERM) closes every session and stops it (exit status 0).
"""

from __future__ import annotations

import argparse

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="run an env as an OpenEnv server (concurrent sessions, one episode each)")
    p.add_argument("env_id", help="a registered env id, e.g. trace/cap-refund-policy-v0")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument("--max-sessions", type=int, default=64, help="concurrent sessions allowed (default 64)")
    p.add_argument("--idle-timeout", type=float, default=600, metavar="SECONDS",
                   help="close a session after this long without a request (default 600; 0: never)")
    p.add_argument("--compress", action="store_true",
                   help="offer WebSocket compression: smaller replies for a slow network, more CPU per step")
    p.add_argument("--env-kwargs", default=None, help="JSON object of gym.make kwargs")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from trace_gym.cli import UsageError, check_count, env_kwargs_arg

    check_count("--port", args.port, low=0, high=65535)
    check_count("--max-sessions", args.max_sessions, high=100_000)
    if not args.idle_timeout >= 0 or args.idle_timeout == float("inf"):
        raise UsageError(f"--idle-timeout must be a number of seconds >= 0 (0: never), got {args.idle_timeout}")
    env_kwargs = env_kwargs_arg(args.env_kwargs)
    from trace_gym.integrations import MissingExtraError

    try:
        from trace_gym.integrations.openenv import create_trace_app, run_app
    except MissingExtraError as exc:
        raise UsageError(str(exc)) from None
    app = create_trace_app(args.env_id, max_sessions=args.max_sessions, idle_timeout_s=args.idle_timeout or None,
                           env_kwargs=env_kwargs)
    print(f"serving {args.env_id} on http://{args.host}:{args.port} (OpenEnv: /ws, /health, /schema); Ctrl-C stops",
          flush=True)
    run_app(app, host=args.host, port=args.port, compress=args.compress)
    print("stopped", flush=True)
    return 0
