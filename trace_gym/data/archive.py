"""One reader for every data source: a folder, a ``.zip``, a ``.tar[.gz]``, or an ``http(s)://`` URL of an archive.

Members are regular files only, read whole with a size cap (:data:`MAX_MEMBER`), and looked up by the end of
their path (:class:`Source`); member names are never used as output paths except by :func:`extract`, which
refuses absolute or escaping names.  Errors are :class:`~trace_gym.data.files.DataFetchError`.
"""

from __future__ import annotations

import tarfile
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .files import DataFetchError, download

__all__ = ["MAX_MEMBER", "Source", "open_source", "open_archive", "extract", "archive_names"]

MAX_MEMBER = 64 << 20  # bytes read from one member (the largest data file is 7 MB)


class Source:
    """Files of an archive or folder, looked up by the end of their path (the shortest path first)."""

    def __init__(self, names: list[str] | Callable[[str], list[str]], read: Callable[[str], bytes | None]):
        if callable(names):
            self._names_for = names
        else:
            ordered = sorted(names, key=lambda n: (n.count("/"), n))
            self._names_for = lambda rel: [n for n in ordered if n == rel or n.endswith("/" + rel)]
        self._read = read

    def candidates(self, rel: str) -> Iterator[bytes]:
        """The bytes of every file whose path ends with ``rel`` (files over the cap are passed over)."""
        for name in self._names_for(rel):
            data = self._read(name)
            if data is not None:
                yield data

    def first(self, rel: str) -> bytes | None:
        """The bytes of the first file ending with ``rel`` (``None``: there is none)."""
        return next(self.candidates(rel), None)


@contextmanager
def open_archive(path: Path) -> Iterator[tuple[list[str], Callable[[str], bytes | None]]]:
    """``(member names, read)`` of a zip or tar archive; ``read(name)`` is ``None`` for a member over the cap."""
    if zipfile.is_zipfile(path):
        try:
            zf = zipfile.ZipFile(path)
        except (OSError, zipfile.BadZipFile) as exc:
            raise DataFetchError(f"{path}: damaged zip archive ({exc}); download it again") from None
        with zf:
            infos = {i.filename: i for i in zf.infolist() if not i.is_dir()}

            def read_zip(name: str) -> bytes | None:
                info = infos[name]
                return zf.read(info) if info.file_size <= MAX_MEMBER else None

            yield list(infos), read_zip
        return
    try:
        tf = tarfile.open(path, "r:*")
    except (tarfile.TarError, OSError) as exc:
        raise DataFetchError(f"{path}: not a readable .tar.gz/.tar/.zip archive ({exc})") from None
    with tf:
        try:
            members = {m.name.lstrip("./"): m for m in tf.getmembers() if m.isfile()}
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise DataFetchError(f"{path}: damaged archive ({exc}); download it again") from None

        def read_tar(name: str) -> bytes | None:
            m = members[name]
            if m.size > MAX_MEMBER:
                return None
            f = tf.extractfile(m)
            return f.read() if f is not None else None

        yield list(members), read_tar


@contextmanager
def open_source(src: str, workdir: Path, log: Callable[[str], None]) -> Iterator[Source]:
    """The files of ``src`` (a folder, an archive, or a URL of one, downloaded into ``workdir``)."""
    if src.startswith(("http://", "https://")):
        path = workdir / "download"
        download(src, path, log)
        with open_source(str(path), workdir, log) as s:
            yield s
        path.unlink(missing_ok=True)
        return
    path = Path(src).expanduser()
    if path.is_dir():  # a mirror or an unpacked archive: look where such a layout keeps the files, never walk it all
        tops = [path, *(c for c in sorted(path.iterdir()) if c.is_dir())]
        bases = [b for t in tops for b in (t, t / "tau2", t / "data" / "tau2", t / "toolsandbox")]

        def names_for(rel: str) -> list[str]:
            found = {(b / rel).relative_to(path).as_posix() for b in bases
                     if (b / rel).is_file() and not (b / rel).is_symlink()}
            return sorted(found, key=lambda n: (n.count("/"), n))

        def read_file(name: str) -> bytes | None:
            p = path / name
            return p.read_bytes() if p.stat().st_size <= MAX_MEMBER else None

        yield Source(names_for, read_file)
        return
    if not path.is_file():
        raise DataFetchError(f"--from {src}: no such file or folder")
    with open_archive(path) as (names, read):
        yield Source(names, read)


def archive_names(path: Path) -> list[str]:
    """The regular-file member names of an archive (``[]`` when it is not a readable archive)."""
    try:
        with open_archive(path) as (names, _):
            return names
    except DataFetchError:
        return []


def extract(path: Path, into: Path) -> None:
    """Unpack an archive's regular files under ``into``, refusing absolute or escaping member names and
    members over the cap."""
    into.mkdir(parents=True, exist_ok=True)
    with open_archive(path) as (names, read):
        for name in names:
            parts = Path(name).parts
            if not parts or Path(name).is_absolute() or ".." in parts:
                raise DataFetchError(f"{path}: unsafe member name {name!r}; not an upstream archive")
            try:
                data = read(name)
            except (OSError, tarfile.TarError, zipfile.BadZipFile, EOFError) as exc:
                raise DataFetchError(f"{path}: damaged or unreadable archive ({exc}); download it again") from None
            if data is None:
                raise DataFetchError(f"{path}: member {name!r} is larger than {MAX_MEMBER >> 20} MiB; "
                                     "not an upstream archive")
            target = into.joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
