"""``--report-to``: TRL's reporters, passed through.  ``tensorboard`` writes event files under the adapter folder
that TensorBoard reads back with the same numbers as ``metrics.jsonl``; a reporter whose package is missing is one
error line saying how to install it, before any model loads."""

from __future__ import annotations

import importlib.util
import json

import pytest

from tests.extras import need
from trace_gym.cli import main

need("torch")
need("trl")
need("peft")

pytestmark = pytest.mark.model

TINY = ["--env", "trace-test/train-single-v0", "--model", "tiny", "--import", "tests.train.envs", "--num-generations", "2",
        "--seeds-per-step", "2", "--max-new-tokens", "6", "--max-completion-length", "32", "--train-seeds", "8",
        "--lora-r", "4", "--lora-alpha", "8", "--no-progress"]


def test_train_reports_to_tensorboard_and_the_event_files_read_back(tmp_path, one_torch_thread):
    pytest.importorskip("tensorboard", reason="tensorboard is not installed: the tensorboard extra",
                        exc_type=ModuleNotFoundError)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = tmp_path / "adapters" / "tb"
    assert main(["train", *TINY, "--out", str(out), "--steps", "2", "--report-to", "tensorboard"]) == 0
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    [events] = list((out / "tensorboard").glob("events.out.tfevents.*"))
    acc = EventAccumulator(str(events.parent))
    acc.Reload()
    scalars = set(acc.Tags()["scalars"])
    assert {"train/reward", "train/loss"} <= scalars, scalars
    reward = [(e.step, e.value) for e in acc.Scalars("train/reward")]
    assert reward == [(r["step"], pytest.approx(r["reward"], abs=1e-6)) for r in rows]  # the same numbers
    assert json.loads((out / "train_config.json").read_text())["report_to"] == "tensorboard"


@pytest.mark.parametrize("reporter, package", [("wandb", "wandb"), ("tensorboard", "tensorboard")])
def test_a_missing_reporter_is_one_line_saying_how_to_install_it(tmp_path, capsys, reporter, package):
    if importlib.util.find_spec(package) is not None or (reporter == "tensorboard"
                                                          and importlib.util.find_spec("tensorboardX") is not None):
        pytest.skip(f"{package} is installed here")
    out = tmp_path / "adapters" / "x"
    assert main(["train", *TINY, "--out", str(out), "--steps", "1", "--report-to", reporter]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"report_to={reporter} needs the {package} package" in err and "pip install" in err
    assert not out.exists()


def test_report_to_is_checked(tmp_path, capsys):
    assert main(["train", *TINY, "--out", str(tmp_path / "a"), "--report-to", "mlflow", "--print-config"]) == 2
    assert "report_to must be one of ('none', 'tensorboard', 'wandb')" in capsys.readouterr().err
