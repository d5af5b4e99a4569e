"""Write docs/env-reference.md, the environment reference, from the registry.

    python scripts/make_env_reference.py [--out docs/env-reference.md] [--check]

Every registered ``trace/*`` id is made and asked for its ``gym.make`` arguments, spaces, reset
options, reward entries and episode ends (:mod:`trace_gym.env_reference`).  Run it after changing
an env's arguments, a spec, or what an env declares, and commit the page.  ``--check`` writes
nothing and exits 1 when the page differs from a fresh render.  Set no ``TRACE_GYM_ENVS_DIR``:
the page documents what a fresh install registers.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trace_gym.env_reference import render_reference  # noqa: E402
from trace_gym.io import atomic_write_text  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "env-reference.md", help="the page to write")
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 when the page is out of date")
    args = ap.parse_args(argv)
    page = render_reference()
    current = args.out.read_text(encoding="utf-8") if args.out.exists() else None
    if args.check:
        if current != page:
            print(f"{args.out} is out of date: run python scripts/make_env_reference.py", file=sys.stderr)
            return 1
        print(f"{args.out} is up to date")
        return 0
    if current != page:
        atomic_write_text(args.out, page)
    print(f"wrote {args.out}" if current != page else f"{args.out} was up to date")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
