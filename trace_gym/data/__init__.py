"""Benchmark data: where the engines find it, the copy packaged with trace-gym, and fetching another.

* :mod:`.locations`: where a benchmark's data is found (the data variable, the per-user cache, the packaged
  copy, a development ``../shared``), and :class:`DataDirError` when it is not;
* :mod:`.manifest`: the shipped checksums and verification against them;
* :mod:`.status`: ``trace-gym data status``;
* :mod:`.fetch`: ``trace-gym data fetch`` through one registered exporter per benchmark
  (:mod:`.tau2_export`, :mod:`.toolsandbox_export`), built on :mod:`.archive` (one reader for folders,
  zip and tar archives, with a size cap), :mod:`.mirror` (verified installs from archives) and
  :mod:`.files` (checksums, downloads, atomic installs).
"""

from .fetch import Exporter, exporter, fetch, not_in_source_note, register_exporter
from .files import MARKER, DataFetchError
from .locations import (
    FETCH_HINT,
    DataDirError,
    DataLocation,
    cache_folder,
    cache_root,
    locate,
    packaged_root,
    tau2_data_dir,
    tau2_domain_dir,
    toolsandbox_data_dir,
)
from .manifest import BENCHMARKS, load_manifest, packaged_files, verify_folder
from .status import describe, same_as_packaged, status

__all__ = ["BENCHMARKS", "DataDirError", "DataFetchError", "DataLocation", "Exporter", "FETCH_HINT", "MARKER",
           "cache_folder", "cache_root", "describe", "exporter", "fetch", "load_manifest", "locate",
           "not_in_source_note", "packaged_files", "packaged_root", "register_exporter", "same_as_packaged", "status",
           "tau2_data_dir", "tau2_domain_dir", "toolsandbox_data_dir", "verify_folder"]
