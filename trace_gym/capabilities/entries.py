"""Registers every capability spec found in ``envs/`` as ``trace/<id>-v0``.

Specs are found in the repository's ``envs/`` folder (shipped inside the package as
``trace_gym/starter_envs``, a link to it in the repository, so an installed wheel has
the starter library too) and in any folder listed in ``TRACE_GYM_ENVS_DIR``
(``os.pathsep``-separated).  Only file names and the ``title``
line are read here, so importing this module stays cheap; each spec is parsed and
validated when its environment is made.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..registration import EnvEntry

__all__ = ["ENV_ENTRIES", "spec_dirs", "spec_files"]

_TITLE = re.compile(r"^title:\s*(.+?)\s*$", re.MULTILINE)
_SUFFIXES = (".yaml", ".yml", ".json")


def spec_dirs() -> list[Path]:
    """Folders searched for spec files, in order."""
    here = Path(__file__).resolve()
    dirs = [here.parents[2] / "envs", here.parents[1] / "starter_envs"]
    for extra in os.environ.get("TRACE_GYM_ENVS_DIR", "").split(os.pathsep):
        if extra.strip():
            dirs.append(Path(extra).expanduser())
    return [d for d in dirs if d.is_dir()]


def spec_files() -> list[Path]:
    """Every spec file (first folder wins when two share a name)."""
    seen: dict[str, Path] = {}
    for d in spec_dirs():
        for p in sorted(d.iterdir()):
            # "_x.json" (reports) and "x.tuned.yaml" / "x.calibration.json" (derived files) are not specs
            if p.suffix in _SUFFIXES and p.is_file() and p.stem not in seen and not p.stem.startswith(("_", ".")) and "." not in p.stem:
                seen[p.stem] = p
    return list(seen.values())


def _description(path: Path) -> str:
    try:
        head = path.read_text(encoding="utf-8")[:4000]
    except OSError:
        return "capability environment"
    m = _TITLE.search(head)
    if m:
        return m.group(1).strip("'\"")
    m = re.search(r'"title"\s*:\s*"([^"]+)"', head)
    return m.group(1) if m else "capability environment"


ENV_ENTRIES: list[EnvEntry] = [
    EnvEntry(
        id=f"trace/{p.stem}-v0",
        entry_point="trace_gym.capabilities.env:CapabilityEnv",
        description=_description(p),
        kwargs={"spec": str(p)},
    )
    for p in spec_files()
]
