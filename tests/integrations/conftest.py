"""The OpenEnv tests run in their own venv (``make test-openenv``: OpenEnv's pins clash with the ``train``
extra), so the main venv, which has no ``openenv``, does not collect them."""

from __future__ import annotations

import importlib.util

collect_ignore = [] if importlib.util.find_spec("openenv") is not None else ["test_openenv_server.py", "test_openenv_faults.py"]
