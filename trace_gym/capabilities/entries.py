"""Registers every capability spec found in ``envs/`` as ``trace/<id>-v0``.

Specs are found in the repository's ``envs/`` folder (shipped inside the package as
``trace_gym/starter_envs``, a link to it in the repository, so an installed wheel has
the starter library too) and in any folder listed in ``TRACE_GYM_ENVS_DIR``
(``os.pathsep``-separated).  Of the shipped specs only file names and the ``title`` and
``domain`` lines are read here, so importing this module stays cheap; a spec in a
``TRACE_GYM_ENVS_DIR`` folder is also checked against the schema (no domain data is
read: :func:`~trace_gym.capabilities.spec.check_spec_file`).  Each spec is fully
validated when its environment is made.

A file that cannot be a spec — over the size limit, not UTF-8, unreadable, or (in a
``TRACE_GYM_ENVS_DIR`` folder) not valid against the schema — is skipped with a
:class:`SpecFileWarning` that names it, so one bad file never breaks ``import trace_gym``
and ``trace-gym envs`` never lists an env that cannot be made.  Two different files with the same name (``cap-x.yaml`` in two
folders) would register one id twice: registration refuses that with an error naming
both (:class:`trace_gym.registration.DuplicateEnvError`).
"""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path

from ..registration import EnvEntry
from .specfile import SPEC_SUFFIXES, SpecError, read_spec_text

__all__ = ["ENV_ENTRIES", "SpecFileWarning", "spec_dirs", "spec_files", "starter_specs_dir"]

_TITLE = re.compile(r"^title:\s*(.+?)\s*$", re.MULTILINE)
_JSON_TITLE = re.compile(r'"title"\s*:\s*"([^"]+)"')
_DOMAIN = re.compile(r"^domain:\s*['\"]?([\w-]+)", re.MULTILINE)
_JSON_DOMAIN = re.compile(r'"domain"\s*:\s*"([\w-]+)"')


class SpecFileWarning(UserWarning):
    """A file in a spec folder was skipped (its name and the reason are in the message)."""


def _shipped_dirs() -> list[Path]:
    here = Path(__file__).resolve()
    return [here.parents[2] / "envs", here.parents[1] / "starter_envs"]


def starter_specs_dir() -> Path:
    """The starter library: ``envs/`` beside the package in a checkout, else the copy in the package
    (``trace_gym/starter_envs``); ``FileNotFoundError`` when neither is there."""
    for cand in _shipped_dirs():
        if cand.is_dir():
            return cand
    raise FileNotFoundError("the starter capability specs were not found (envs/ beside trace_gym, or "
                            "trace_gym/starter_envs in an installed package)")


def spec_dirs() -> list[Path]:
    """Folders searched for spec files, in order."""
    dirs = _shipped_dirs()
    for extra in os.environ.get("TRACE_GYM_ENVS_DIR", "").split(os.pathsep):
        if extra.strip():
            dirs.append(Path(extra).expanduser())
    return [d for d in dirs if d.is_dir()]


def _candidates() -> list[Path]:
    seen: set[Path] = set()
    out: list[Path] = []
    for d in spec_dirs():
        try:
            names = sorted(d.iterdir())
        except OSError as exc:
            warnings.warn(f"spec folder {d} skipped: {exc.strerror or exc}", SpecFileWarning, stacklevel=2)
            continue
        for p in names:
            # "_x.json" (reports) and "x.tuned.yaml" / "x.calibration.json" (derived files) are not specs
            if p.suffix not in SPEC_SUFFIXES or p.stem.startswith(("_", ".")) or "." in p.stem or not p.is_file():
                continue
            real = p.resolve()
            if real not in seen:  # the starter folder is reached through two paths in a checkout
                seen.add(real)
                out.append(p)
    return out


def _read(path: Path, shipped: set[Path]) -> str | None:
    """The spec's text, or None (with a warning) when it cannot be one; a spec outside the shipped
    folders is checked against the schema too (the shipped ones are checked by the test suite)."""
    try:
        text = read_spec_text(path)
        if path.resolve().parent not in shipped:
            from .spec import check_spec_file  # the JSON-Schema engine: only for a user's spec folder

            check_spec_file(path, text)
        return text
    except SpecError as exc:
        warnings.warn(f"spec file skipped: {exc}", SpecFileWarning, stacklevel=2)
        return None


def _description(text: str) -> str:
    head = text[:4000]
    m = _TITLE.search(head)
    if m:
        return m.group(1).strip("'\"")
    m = _JSON_TITLE.search(head)
    return m.group(1) if m else "capability environment"


def _entries() -> list[EnvEntry]:
    out = []
    shipped = {d.resolve() for d in _shipped_dirs() if d.is_dir()}
    for p in _candidates():
        text = _read(p, shipped)
        if text is not None:
            domain = _DOMAIN.search(text[:4000]) or _JSON_DOMAIN.search(text[:4000])
            out.append(EnvEntry(id=f"trace/{p.stem}-v0", entry_point="trace_gym.capabilities.env:CapabilityEnv",
                                description=_description(text), kwargs={"spec": str(p)}, family="capability",
                                domain=domain.group(1) if domain else ""))
    return out


def spec_files() -> list[Path]:
    """Every readable spec file in the spec folders now (a file reached through two folders once)."""
    return [Path(e.kwargs["spec"]) for e in _entries()]


ENV_ENTRIES: list[EnvEntry] = _entries()
