"""Whether a tool the request needs is missing from the tools offered: the gate of the ``needs`` routing rule.

A request the agent cannot complete with the tools it is offered is one to answer by saying so, and the
base model keeps those conversations; every other one goes to an adapter.  The gate learns from
:class:`NeedExample` s — a request (the first user message), the tools its conversation offered, the tools
its reference solution calls (``needs``; ``None`` where not known) and whether its right answer is to refuse
— drawn from what TRACE may see: the target's own learning tasks (their gold, :class:`~trace_gym.core.tasks.Gold`)
and the synthesized capability envs' reference solutions, each acting example also paired with copies that
withhold one of the tools it needs (:func:`withheld_pairs`).

A query (request ``r``, offered tools ``T``) gets two scores:

* **need**: for every known tool ``t`` not in ``T``, the weighted share of ``t`` among the needs of the ``k``
  acting examples with the highest weight ``cos(r, r_j)^a · J(T∖{t}, T_j∖{t})^b`` (``J``: Jaccard overlap of
  the other tools offered, so an example whose task offered the same other tools counts most); the largest
  share over those tools, and the tool it belongs to;
* **refusal**: the largest cosine between ``r`` and a refusal example that ``T`` resembles: where the example
  names the tools withheld from it (``missing``), ``T`` lacks every one of them too; where it does not, it
  offered every tool of ``T`` (nothing the query has was missing there).

* **same tools**: among the examples that offered exactly the tools of ``T`` and whose request is at least
  ``same_similarity`` alike, the nearest one's answer (refuse or act), when there is one: a request like a
  known one, with the same tools, is answered the same way.

With ``same_tools`` on, the same-tools answer decides wherever there is one; otherwise (and where there is
none) a needed tool is missing when need ≥ ``need_threshold`` or refusal ≥ ``refusal_threshold``.  The
thresholds, ``same_tools`` and which examples take part are chosen by :func:`calibrate` from the learning
tasks alone (leave one out).

Errors: :class:`ValueError` for an empty example set or a setting out of range.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..io import atomic_write_bytes, atomic_write_json
from .embed import Embedder

__all__ = ["NeedExample", "NeedGate", "NeedScore", "withheld_pairs", "calibrate", "Calibration", "GATE_DEFAULTS"]

GATE_DEFAULTS: dict[str, Any] = {"need_threshold": 0.7, "refusal_threshold": 0.9, "k": 5, "text_power": 4.0,
                                 "tool_power": 1.0, "same_tools": False, "same_similarity": 0.5}
"""The gate's settings before calibration."""


@dataclass(frozen=True)
class NeedExample:
    """One request the gate learns from (module docstring); ``origin`` says which set it belongs to
    (``"target"``: the target's learning tasks; ``"capability"``: a synthesized env's; ``"withheld"``: a copy
    of an acting example with a needed tool withheld) and ``source`` which task it is (leave-one-out drops a
    source's examples together)."""

    text: str
    tools: tuple[str, ...]
    needs: tuple[str, ...] | None
    refuse: bool
    source: str = ""
    origin: str = "target"
    missing: tuple[str, ...] | None = None  # a refusal's withheld tools, where known

    @classmethod
    def make(cls, text: str, tools: Iterable[str], needs: Iterable[str] | None, refuse: bool, source: str = "",
             origin: str = "target", missing: Iterable[str] | None = None) -> NeedExample:
        offered = tuple(sorted(set(tools)))
        gone = tuple(sorted(set(missing) - set(offered))) if missing is not None and refuse else None
        return cls(text, offered, tuple(sorted(set(needs))) if needs is not None else None, bool(refuse), source, origin,
                   gone or None)


def withheld_pairs(examples: Iterable[NeedExample]) -> list[NeedExample]:
    """For every acting example, one refusal copy per needed tool it offers, with that tool withheld (how
    insufficient-information tasks are made from answerable ones)."""
    out = []
    for e in examples:
        if e.refuse or not e.needs:
            continue
        for t in e.needs:
            if t in e.tools:
                out.append(replace(e, tools=tuple(x for x in e.tools if x != t), refuse=True, origin="withheld",
                                   missing=(t,)))
    return out


@dataclass(frozen=True)
class NeedScore:
    need: float
    tool: str | None   # the missing tool the need score belongs to
    refusal: float
    same: bool | None = None  # the nearest same-tools example's answer (True: refuse); None: there is none


@dataclass
class NeedGate:
    """The gate over ``examples`` (module docstring); ``settings`` override :data:`GATE_DEFAULTS`."""

    examples: list[NeedExample]
    model: str
    vectors: np.ndarray
    settings: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.examples:
            raise ValueError("a need gate needs at least one example")
        if len(self.vectors) != len(self.examples):
            raise ValueError(f"{len(self.examples)} examples but {len(self.vectors)} vectors")
        unknown = sorted(set(self.settings) - set(GATE_DEFAULTS))
        if unknown:
            raise ValueError(f"unknown need-gate setting(s) {unknown}; known: {sorted(GATE_DEFAULTS)}")
        s = {**GATE_DEFAULTS, **self.settings}
        if int(s["k"]) < 1 or s["text_power"] < 0 or s["tool_power"] < 0:
            raise ValueError(f"need-gate settings out of range: {s}")
        self._s = s
        self._acting = [i for i, e in enumerate(self.examples) if not e.refuse and e.needs is not None]
        self._refusing = [i for i, e in enumerate(self.examples) if e.refuse]
        self.catalog = sorted({t for e in self.examples for t in (*e.tools, *(e.needs or ()))})

    @classmethod
    def build(cls, examples: Sequence[NeedExample], embedder: Embedder | None = None,
              settings: dict[str, Any] | None = None) -> NeedGate:
        embedder = embedder or Embedder()
        examples = list(examples)
        vecs = embedder.encode([e.text for e in examples]) if examples else np.zeros((0, 0), np.float32)
        return cls(examples, embedder.model_name, vecs, dict(settings or {}))

    def subset(self, keep: Sequence[int], settings: dict[str, Any] | None = None) -> NeedGate:
        return NeedGate([self.examples[i] for i in keep], self.model, self.vectors[list(keep)],
                        dict(self.settings if settings is None else settings))

    # ------------------------------------------------------------------ scoring
    def score(self, query: np.ndarray, tools: Iterable[str], *, skip: str | None = None) -> NeedScore:
        """The scores of a query embedding (normalised) offering ``tools``; ``skip`` leaves out one source."""
        s, offered = self._s, set(tools)
        cos = np.clip(self.vectors @ query, 0.0, 1.0)
        acting = [i for i in self._acting if self.examples[i].source != skip]
        best, arg = 0.0, None
        if acting:
            text_w = cos[acting] ** s["text_power"]
            for t in self.catalog:
                if t in offered:
                    continue
                rest = offered - {t}
                overlap = np.array([_jaccard(rest, set(self.examples[i].tools) - {t}) for i in acting])
                w = text_w * overlap ** s["tool_power"]
                top = np.lexsort((np.arange(len(w)), -w))[: int(s["k"])]
                total = float(w[top].sum())
                if total <= 0.0:
                    continue
                share = float(sum(w[j] for j in top if t in (self.examples[acting[j]].needs or ())) / total)
                if share > best:
                    best, arg = share, t
        refusal = 0.0
        for i in self._refusing:
            e = self.examples[i]
            like = not (set(e.missing) & offered) if e.missing else offered <= set(e.tools)
            if e.source != skip and like:
                refusal = max(refusal, float(cos[i]))
        same, near = None, float(s["same_similarity"])
        for i, e in enumerate(self.examples):  # the nearest example offering exactly these tools
            if e.source != skip and set(e.tools) == offered and cos[i] >= near:
                same, near = e.refuse, float(cos[i]) + 1e-12
        return NeedScore(best, arg, refusal, same)

    def decide(self, sc: NeedScore, settings: dict[str, Any] | None = None) -> bool:
        """Whether the scores say a needed tool is missing (``settings`` override the gate's own)."""
        s = {**self._s, **(settings or {})}
        if s["same_tools"] and sc.same is not None:
            return sc.same
        return sc.need >= s["need_threshold"] or sc.refusal >= s["refusal_threshold"]

    def missing(self, query: np.ndarray, tools: Iterable[str]) -> bool:
        return self.decide(self.score(query, tools))

    # ------------------------------------------------------------------ storage
    def save(self, path: str | Path) -> None:
        """``<path>.json`` (examples, model, settings) and ``<path>.npy`` (embeddings), both written atomically."""
        import io

        path = Path(path)
        atomic_write_json(path.with_suffix(".json"), {"model": self.model, "settings": self.settings,
                                                      "examples": [asdict(e) for e in self.examples]})
        buf = io.BytesIO()
        np.save(buf, self.vectors)
        atomic_write_bytes(path.with_suffix(".npy"), buf.getvalue())

    @classmethod
    def load(cls, path: str | Path) -> NeedGate:
        path = Path(path)
        meta = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
        examples = [NeedExample(e["text"], tuple(e["tools"]), tuple(e["needs"]) if e["needs"] is not None else None,
                                bool(e["refuse"]), e.get("source", ""), e.get("origin", "target"),
                                tuple(e["missing"]) if e.get("missing") else None) for e in meta["examples"]]
        return cls(examples, meta["model"], np.load(path.with_suffix(".npy")), dict(meta.get("settings") or {}))


def _jaccard(a: set[str], b: set[str]) -> float:
    union = a | b
    return len(a & b) / len(union) if union else 1.0


# ----------------------------------------------------------------------------- calibration
NEED_GRID = (0.5, 0.6, 0.7, 0.8, 0.9, 1.01)
REFUSAL_GRID = (0.7, 0.8, 0.9, 1.01)
ORIGIN_SETS = (("target", "withheld"), ("target", "withheld", "capability"))


@dataclass
class Calibration:
    """What :func:`calibrate` chose and how it scored: ``origins`` (the example sets kept), the thresholds, and
    on the learning tasks left out one at a time ``n``, ``correct``, missed refusals and wrongly kept requests."""

    origins: tuple[str, ...]
    need_threshold: float
    refusal_threshold: float
    n: int
    correct: int
    missed_refusals: int
    false_refusals: int
    same_tools: bool = False
    table: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def calibrate(gate: NeedGate, embedder: Embedder | None = None, *, refusal_cost: float = 2.0,
              need_grid: Sequence[float] = NEED_GRID, refusal_grid: Sequence[float] = REFUSAL_GRID,
              origin_sets: Sequence[Sequence[str]] = ORIGIN_SETS) -> tuple[NeedGate, Calibration]:
    """The gate with the example sets and thresholds that score best on the target's own examples, each scored
    with its own source's examples left out.  The score counts a missed refusal ``refusal_cost`` times a request
    wrongly kept from the adapters (a refusal the base model keeps is what routing can lose); ties go to the
    lower thresholds (more refusals kept), then to the fewer example sets.  Raises ``ValueError`` without a
    target example of each kind."""
    if refusal_cost <= 0:
        raise ValueError(f"refusal_cost must be > 0, got {refusal_cost}")
    targets = [i for i, e in enumerate(gate.examples) if e.origin == "target"]
    kinds = {gate.examples[i].refuse for i in targets}
    if kinds != {True, False}:
        raise ValueError("calibrating the need gate needs target examples that refuse and ones that act; got "
                         f"{len(targets)} target example(s), all {'refusing' if True in kinds else 'acting'}")
    best: tuple[float, ...] | None = None
    chosen: Calibration | None = None
    table = []
    for rank, origins in enumerate(origin_sets):
        keep = [i for i, e in enumerate(gate.examples) if e.origin in origins]
        part = gate.subset(keep)
        scored = [(gate.examples[i].refuse, part.score(gate.vectors[i], gate.examples[i].tools, skip=gate.examples[i].source))
                  for i in targets]
        for same in (False, True):
            for tn in need_grid:
                for tr in refusal_grid:
                    says = [(refuse, part.decide(sc, {"same_tools": same, "need_threshold": tn, "refusal_threshold": tr}))
                            for refuse, sc in scored]
                    missed = sum(1 for refuse, kept in says if refuse and not kept)
                    false = sum(1 for refuse, kept in says if not refuse and kept)
                    cost = refusal_cost * missed + false
                    table.append({"origins": list(origins), "same_tools": same, "need_threshold": tn,
                                  "refusal_threshold": tr, "missed_refusals": missed, "false_refusals": false})
                    key = (-cost, -tn, -tr, -int(same), -rank)
                    if best is None or key > best:
                        best = key
                        chosen = Calibration(tuple(origins), tn, tr, len(scored), len(scored) - missed - false, missed,
                                             false, same_tools=same)
    assert chosen is not None
    chosen.table = table
    keep = [i for i, e in enumerate(gate.examples) if e.origin in chosen.origins]
    settings = {**gate.settings, "need_threshold": chosen.need_threshold, "refusal_threshold": chosen.refusal_threshold,
                "same_tools": chosen.same_tools}
    return gate.subset(keep, settings), chosen
