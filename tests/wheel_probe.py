"""Run by a venv that holds an installed trace-gym wheel (not by pytest): import the given modules, step
every registered env, exercise the scoring paths whose imports are lazy, and print one JSON report.

    python wheel_probe.py SITE_PACKAGES MODULES_JSON [--envs]

Every module's import is tried and its outcome reported (``"ok"``, or the exception's type, the missing
module's name and the message); nothing here decides what should pass — the test does.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import sys
import traceback


def _import(name: str) -> dict:
    try:
        importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - reported, judged by the test
        return {"error": type(exc).__name__, "missing": getattr(exc, "name", None), "message": str(exc)[:500],
                "extra_error": type(exc).__name__ == "MissingExtraError"}
    return {"ok": True}


def _step_every_env() -> dict:
    import gymnasium as gym

    from trace_gym.data import locate

    where = {b: locate(b)[0].how for b in ("tau2", "toolsandbox")}
    ids = sorted(i for i in gym.registry if i.startswith("trace/"))
    stepped = []
    for env_id in ids:
        env = gym.make(env_id)
        obs, info = env.reset(seed=0)
        assert isinstance(obs, str) and obs, env_id
        obs, reward, terminated, truncated, info = env.step("Hello! How can I help you today?")
        assert isinstance(obs, str) and isinstance(reward, float), env_id
        env.close()
        stepped.append(env_id)
    return {"where": where, "ids": ids, "stepped": stepped}


def _lazy_scoring() -> dict:
    """The scoring paths that import a core dependency only when first used (nltk, scipy)."""
    from trace_gym.toolsandbox.scenarios import ColumnSimilarity
    from trace_gym.toolsandbox.similarity import rouge_l, table_similarity

    rows = [{"n": f"name {i}"} for i in range(8)]  # 7+ rows: the optimal assignment comes from scipy
    return {"rouge_l": rouge_l("the cats are running", "a cat runs"),
            "table": table_similarity(rows, {"n"}, list(reversed(rows)), {"n": ColumnSimilarity(kind="rouge_l")})}


def main() -> None:
    site, names = sys.argv[1], json.loads(sys.argv[2])
    report: dict = {"imports": {n: _import(n) for n in names}}
    import trace_gym

    report["trace_gym_file"] = trace_gym.__file__
    report["from_site"] = trace_gym.__file__.startswith(site)
    report["sys_path"] = sys.path
    report["distributions"] = {d.metadata["Name"].lower(): d.version for d in importlib.metadata.distributions()}
    try:
        report["scoring"] = _lazy_scoring()
        if "--envs" in sys.argv:
            report["envs"] = _step_every_env()
    except Exception:  # noqa: BLE001 - the test shows it
        report["failure"] = traceback.format_exc()
    print(json.dumps(report))


if __name__ == "__main__":
    main()
