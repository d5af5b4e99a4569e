"""The format warm start in front of the TRACE loop: SFT on reference episodes, merged into the base weights.

A small model may never emit a parseable tool call on a target, so its rollouts score
about 0 and neither the analysis nor training has anything to work with.  A *format-only*
warm start fixes that for every method alike: LoRA SFT
(:func:`trace_gym.train.sft.warm_start`) on reference episodes of capability envs of the
target's tool domain (train-split tasks, never the evaluation scenarios), then the adapter
merged into the base weights (:func:`trace_gym.train.sft.merge_and_save`).  The merged
folder is a plain model (weights and tokenizer) that every later stage loads as "the
model": the base policy, calibration, GRPO, GEPA, the adapters and the evaluation.

:func:`run_warm_start` writes, under its folder::

    adapter/           # the SFT adapter, its warm_start.json and sft_metrics.jsonl
    model/             # the merged model (save_pretrained; written to a temporary folder, then renamed)
    warm_start.json    # settings, what it trained on, steps, loss before/after, seconds

A finished warm start with the same :class:`WarmStartSettings` is reused; one made with
other settings is refused (:class:`WarmStartMismatch`, naming what changed), so a resumed
run never mixes weights.  The default envs are every *built-in* capability env whose
registry entry declares the target's domain (:func:`domain_capability_envs`), asked of the
registry, never read off an id.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..io import atomic_write_json
from .store import StageOutput

__all__ = ["WarmStartSettings", "WarmStart", "WarmStartMismatch", "run_warm_start", "finished_warm_start",
           "check_warm_fields", "domain_capability_envs",
           "target_record", "RECORD", "MODEL_DIR", "ADAPTER_DIR"]

RECORD = "warm_start.json"
MODEL_DIR = "model"
ADAPTER_DIR = "adapter"
FORMAT = "trace-gym/warm-start@1"


class WarmStartMismatch(ValueError):
    """The folder holds a finished warm start made with other settings."""


def check_warm_fields(cfg: Any) -> None:
    """Clear errors for bad warm-start knobs of a front-end config (``warm_start``, ``warm_start_envs``,
    ``warm_start_steps``, ``warm_start_seeds``, ``warm_start_lr``: the demo's and compare's fields)."""
    if cfg.warm_start is not None and not isinstance(cfg.warm_start, bool):
        raise ValueError(f"warm_start must be true, false or null (automatic), got {cfg.warm_start!r}")
    envs = cfg.warm_start_envs
    if envs is not None and (isinstance(envs, str) or not all(isinstance(e, str) and e for e in envs) or not envs):
        raise ValueError(f"warm_start_envs must be a non-empty list of env ids or null (the target domain's), got {envs!r}")
    for name in ("warm_start_steps", "warm_start_seeds"):
        v = getattr(cfg, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    if isinstance(cfg.warm_start_lr, bool) or not isinstance(cfg.warm_start_lr, (int, float)) or not cfg.warm_start_lr > 0:
        hint = " (text, not a number: YAML reads 1e-4 as text, write 0.0001 or 1.0e-4)" if isinstance(cfg.warm_start_lr, str) else ""
        raise ValueError(f"warm_start_lr must be a number > 0, got {cfg.warm_start_lr!r}{hint}")


def target_record(env_id: str) -> dict[str, str] | None:
    """The registry's record (id, family, domain, ...) of ``env_id``, or ``None`` when it is not registered."""
    from ..registration import env_records

    return next((r for r in env_records() if r["id"] == env_id), None)


def domain_capability_envs(env_id: str) -> list[str]:
    """The built-in capability envs whose registry entry declares ``env_id``'s domain, sorted.

    Capability envs registered at run time (a synthesized spec) are left out: they are
    made from the target's own analysis, not format demonstrations, and a resumed run
    in the same process must see the same list.
    """
    from ..capabilities.entries import ENV_ENTRIES
    from ..registration import env_records

    mine = target_record(env_id)
    if mine is None:
        raise ValueError(f"{env_id} is not a registered trace-gym env")
    builtin = {e.id for e in ENV_ENTRIES}
    return sorted(r["id"] for r in env_records()
                  if r["family"] == "capability" and r["domain"] == mine["domain"] and r["id"] != env_id and r["id"] in builtin)


@dataclass
class WarmStartSettings:
    """What a warm start depends on; a stored one is reused only when every field agrees."""

    model: str                    # the model it starts from (a name or folder the trainer loads)
    envs: list[str]               # capability envs the demonstrations come from
    seeds_per_env: int = 3        # train-split tasks per env
    steps: int = 8                # optimizer steps
    learning_rate: float = 2e-4
    seed: int = 0
    lora_r: int = 16              # the LoRA is merged, so its size is independent of later adapters
    lora_alpha: int = 32
    batch_size: int = 4
    max_length: int = 4096

    def validate(self) -> WarmStartSettings:
        if not self.envs:
            raise ValueError("a warm start needs at least one env to draw demonstrations from")
        for name in ("seeds_per_env", "steps", "lora_r", "lora_alpha", "batch_size", "max_length"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"warm start {name} must be an int >= 1, got {v!r}")
        if not self.learning_rate > 0:
            raise ValueError(f"warm start learning_rate must be > 0, got {self.learning_rate!r}")
        return self

    def to_dict(self) -> dict[str, Any]:
        return json.loads(json.dumps(dataclasses.asdict(self)))

    def train_config(self, out: Path) -> Any:
        from ..train.config import TrainConfig

        return TrainConfig(model=self.model[3:] if self.model.startswith("hf:") else self.model, out=str(out),
                           sft_envs=list(self.envs), sft_seeds_per_env=self.seeds_per_env, sft_max_steps=self.steps,
                           sft_learning_rate=self.learning_rate, sft_batch_size=self.batch_size,
                           sft_max_length=self.max_length, lora_r=self.lora_r, lora_alpha=self.lora_alpha,
                           seed=self.seed, progress=False, manifest=False)


@dataclass
class WarmStart(StageOutput):
    """A finished warm start: the merged model folder and what it was trained on."""

    model: str                    # the merged model folder: what every later stage loads
    record: str                   # its warm_start.json
    settings: dict[str, Any] = field(default_factory=dict)
    envs: list[str] = field(default_factory=list)
    demonstrations: int = 0
    steps: int = 0
    loss_before: float | None = None
    loss_after: float | None = None
    seconds: float = 0.0          # SFT and merge, when it was made
    reused: bool = False          # found finished in the folder (made by an earlier run)

    def artifacts(self) -> list[str]:
        return [self.record, str(Path(self.model) / "config.json")]

    def headline(self) -> str:
        return (f"{self.demonstrations} reference episodes of {len(self.envs)} capability env(s), {self.steps} SFT steps, "
                f"loss {_num(self.loss_before)} → {_num(self.loss_after)}; merged into the base weights")


def _num(x: float | None) -> str:
    return "?" if x is None else f"{x:.3f}"


def finished_warm_start(folder: str | Path, settings: WarmStartSettings) -> WarmStart | None:
    """The finished warm start in ``folder`` (``None`` when there is none); one made with other settings raises
    :class:`WarmStartMismatch` (nothing is written: a front-end can check before it changes anything)."""
    folder = Path(folder)
    path = folder / RECORD
    if not path.is_file() or not (folder / MODEL_DIR / "config.json").is_file():
        return None
    doc = json.loads(path.read_text(encoding="utf-8"))
    before, now = doc.get("settings") or {}, settings.to_dict()
    changed = sorted(k for k in set(before) | set(now) if before.get(k) != now.get(k))
    if changed:
        raise WarmStartMismatch(f"{folder} holds a warm start made with other settings ({', '.join(changed)} changed); "
                                "use the same settings, another output folder, or delete that folder")
    return WarmStart(str(folder / MODEL_DIR), str(path), now, list(doc["envs"]), int(doc["demonstrations"]),
                     int(doc["steps"]), doc.get("loss_before"), doc.get("loss_after"), float(doc.get("seconds", 0.0)),
                     reused=True)


def run_warm_start(settings: WarmStartSettings, folder: str | Path) -> WarmStart:
    """Make (or reuse) the merged warm-start model under ``folder`` (see the module docstring).

    A progress line (:mod:`trace_gym.progress`) follows the SFT steps and the merge.
    """
    from ..progress import track
    from ..train.models import load_model_and_tokenizer, resolve_device, resolve_dtype
    from ..train.sft import merge_and_save, progress_callback, warm_start

    settings.validate()
    folder = Path(folder)
    found = finished_warm_start(folder, settings)
    if found is not None:
        return found
    started = time.perf_counter()
    cfg = settings.train_config(folder / ADAPTER_DIR)
    cfg.validate()
    bar = track(f"warm start: SFT on {len(settings.envs)} env(s)", total=settings.steps + 1, unit="steps")

    try:
        bar.update(0, note="loading the model, playing the reference episodes, loss before")
        model, tok = load_model_and_tokenizer(cfg.model, seed=cfg.seed, dtype=resolve_dtype(cfg.dtype, resolve_device(cfg.device)))
        res = warm_start(cfg, out=folder / ADAPTER_DIR, model=model, tokenizer=tok, manifest=False, callbacks=[progress_callback(bar)],
                         loss_sample=8)
        bar.update(settings.steps, note="merging")
        merge_and_save(cfg, folder / ADAPTER_DIR, folder / MODEL_DIR, model=model, tokenizer=tok)
        bar.update(settings.steps + 1, note=f"loss {res.record['loss_before']:.3f} → {res.record['loss_after']:.3f}")
    except BaseException:
        bar.close(aborted=True)
        raise
    bar.close()
    rec = res.record
    seconds = round(time.perf_counter() - started, 1)
    doc = {"format": FORMAT, "settings": settings.to_dict(), "model": str(folder / MODEL_DIR),
           "adapter": str(folder / ADAPTER_DIR), "envs": rec["envs"], "per_env": rec["per_env"],
           "demonstrations": rec["demonstrations"], "tasks": rec["tasks"], "skipped": rec["skipped"],
           "steps": rec["steps"], "loss_before": rec["loss_before"], "loss_after": rec["loss_after"],
           "sft_seconds": rec["seconds"], "seconds": seconds, "created": rec["created"],
           **{k: rec[k] for k in ("tokens", "trained_tokens", "mean_tokens") if k in rec}}
    atomic_write_json(folder / RECORD, doc)
    return WarmStart(str(folder / MODEL_DIR), str(folder / RECORD), settings.to_dict(), list(rec["envs"]),
                     int(rec["demonstrations"]), int(rec["steps"]), rec["loss_before"], rec["loss_after"], seconds)
