"""Progress lines for long runs: episodes (or steps) done of the total, reward so far, ETA.

The stages that play many episodes announce their work with :func:`track`; a
front-end decides whether and how it is shown by opening :func:`reporting` around
the run.  Without an open reporter a tracker is silent, so library calls print
nothing unless asked to::

    with reporting(console):                       # a CLI command or the demo
        ...
        with track("calibrate trace/cap-x-v0", total=32) as t:   # inside a stage
            for episode in ...:
                t.tick(trajectory)                 # a Trajectory, a reward, or None

On a terminal the reporter is one rich progress display (every tracker a line,
written to the console it was given, stderr by default, so machine-readable stdout
stays clean).  Elsewhere (CI logs, a pipe) it writes a plain line when a tracker's
first item is done, at most every ``interval_s`` seconds while it runs, and when it
ends; a tracker that nothing has advanced for ``interval_s`` seconds (a long step, a model
loading) still gets a line every ``interval_s`` seconds, so a log never goes silent while
work runs; a tracker left by an exception (a ``with`` block) adds no line, so an error
stays the last thing said.

Reporters nest: an inner ``reporting()`` joins the open one (one display per
process), and ``reporting(enabled=False)`` silences what runs inside it.  Torch-free.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console

__all__ = ["Reporter", "Tracker", "reporting", "track", "active", "format_seconds"]

_STACK: list[Reporter] = []


def format_seconds(s: float | None) -> str:
    """``1h02m``, ``3m05s``, ``42s``; ``?`` when unknown."""
    if s is None or not math.isfinite(s) or s < 0:
        return "?"
    s = int(round(s))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


def _reward_of(item: Any) -> float | None:
    """The reward an episode report carries: a Trajectory-like ``.reward``, a number, or a dict's ``"reward"``."""
    if item is None or isinstance(item, bool):
        return None
    if isinstance(item, (int, float)):
        return float(item)
    if isinstance(item, dict):
        value = item.get("reward")
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    value = getattr(item, "reward", None)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class Tracker:
    """One unit of long work: ``done`` of ``total`` (``None``: unknown) ``unit``, a reward and an ETA.

    ``tick(item)`` counts one finished item (its reward joins the mean shown); ``skip(n)``
    counts items done in an earlier run (they do not count in the ETA's rate or the
    reward); ``update(completed, reward=...)`` sets the count and shows ``reward`` as
    the latest value (training steps).  ``close()`` (or leaving the ``with`` block) ends it.
    """

    def __init__(self, reporter: Reporter | None, description: str, total: int | None, unit: str):
        self.reporter = reporter
        self.description = description
        self.total = total
        self.unit = unit
        self.done = 0
        self.fresh = 0                      # items finished in this run (the ETA's rate)
        self.started = time.monotonic()
        self._sum = 0.0
        self._n = 0
        self._latest: float | None = None
        self.note = ""
        self.closed = False
        self.handle: Any = None
        if reporter is not None:
            reporter._open(self)

    # -- what is shown ------------------------------------------------------------
    @property
    def reward(self) -> float | None:
        if self._latest is not None:
            return self._latest
        return self._sum / self._n if self._n else None

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def eta(self) -> float | None:
        """Seconds left at this run's rate so far (``None`` before the first item or without a total)."""
        if self.total is None or self.fresh == 0:
            return None
        left = max(0, self.total - self.done)
        return (time.monotonic() - self.started) / self.fresh * left

    def _when(self) -> str:
        if not self.closed:
            return f"{format_seconds(self.elapsed)} elapsed"
        finished = self.total is None or self.done >= self.total
        return f"{'done in' if finished else 'stopped after'} {format_seconds(self.elapsed)}"

    def status(self, *, timing: bool = False) -> str:
        """``mean reward 0.250 · ETA 3m10s`` (what follows the count); ``timing`` adds the time taken once closed."""
        parts = [self._when()] if timing and self.closed else []
        if self.reward is not None:
            parts.append(f"{'reward' if self._latest is not None else 'mean reward'} {self.reward:.3f}")
        if self.note:
            parts.append(self.note)
        if self.total is not None and not self.closed:
            parts.append(f"ETA {format_seconds(self.eta())}")
        return " · ".join(parts)

    def line(self) -> str:
        """The whole progress line as plain text."""
        count = f"{self.done}/{self.total}" if self.total is not None else f"{self.done}"
        pct = f" ({100 * self.done // self.total}%)" if self.total else ""
        tail = self.status()
        return f"{self.description}: {count} {self.unit}{pct} · {self._when()}" + (f" · {tail}" if tail else "")

    # -- feeding it -------------------------------------------------------------------
    def tick(self, item: Any = None, *, n: int = 1) -> None:
        """``n`` items finished in this run; ``item`` (a trajectory, a reward, a dict) adds its reward."""
        reward = _reward_of(item)
        if reward is not None:
            self._sum += reward
            self._n += 1
        self.done += n
        self.fresh += n
        self._changed()

    def skip(self, n: int = 1) -> None:
        """``n`` items already done (an earlier run): counted, but not in the rate or the reward."""
        if n > 0:
            self.done += n
            self._changed()

    def update(self, completed: int | None = None, *, reward: float | None = None, note: str | None = None) -> None:
        """Set the count (items past the starting count are this run's), the latest reward and a note."""
        if completed is not None and completed != self.done:
            self.fresh += max(0, completed - self.done)
            self.done = completed
        if reward is not None:
            self._latest = float(reward)
        if note is not None:
            self.note = note
        self._changed()

    def start_at(self, completed: int) -> None:
        """Begin at ``completed`` (a resumed run) without counting those in the rate."""
        self.done = completed
        self._changed()

    def _changed(self) -> None:
        if self.reporter is not None and not self.closed:
            self.reporter._refresh(self)

    def close(self, *, aborted: bool = False) -> None:
        """End the tracker; ``aborted`` (an exception ended the work) adds no plain line."""
        if self.closed:
            return
        self.closed = True
        if self.reporter is not None:
            self.reporter._close(self, aborted=aborted)

    def __call__(self, item: Any = None) -> None:  # usable as an ``on_episode`` callback
        self.tick(item)

    def __enter__(self) -> Tracker:
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        self.close(aborted=exc_type is not None)


class Reporter:
    """Shows every open :class:`Tracker`: a rich live display on a terminal, plain lines elsewhere.

    ``live`` forces the mode (default: whether ``console`` is a terminal); ``interval_s``
    is the least time between two plain lines of one tracker.
    """

    def __init__(self, console: Console | None = None, *, live: bool | None = None, interval_s: float = 30.0,
                 enabled: bool = True):
        self.console = console or Console(stderr=True)
        self.enabled = enabled
        self.live = self.console.is_terminal if live is None else live
        self.interval_s = float(interval_s)
        self._progress: Any = None
        self._last_line: dict[int, float] = {}
        self._open_trackers: dict[int, Tracker] = {}
        self._lock = threading.Lock()
        self._quiet: threading.Event | None = None  # set to stop the heartbeat thread of plain mode

    # -- the display --------------------------------------------------------------
    def _rich(self) -> Any:
        if self._progress is None:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
            from rich.table import Column

            # fits 80 columns: a long description folds onto a second line rather than losing its end
            self._progress = Progress(
                TextColumn("{task.description}", table_column=Column(min_width=24, max_width=30, overflow="fold")),
                BarColumn(bar_width=10),
                MofNCompleteColumn(),
                TextColumn("{task.fields[status]}", table_column=Column(max_width=32, overflow="fold")),
                console=self.console, transient=False, expand=False,
            )
            self._progress.start()
        return self._progress

    def _open(self, t: Tracker) -> None:
        if not self.enabled:
            return
        if self.live:
            t.handle = self._rich().add_task(t.description, total=t.total, status=t.status())
        else:
            self._open_trackers[id(t)] = t
            if self._quiet is None and self.interval_s > 0:  # 0: a line on every change already
                self._quiet = threading.Event()
                threading.Thread(target=self._heartbeat, args=(self._quiet,), daemon=True, name="trace-gym-progress").start()

    def _heartbeat(self, quiet: threading.Event) -> None:
        """Plain mode: a line for every open tracker that has been silent for ``interval_s`` seconds."""
        while not quiet.wait(min(self.interval_s, 5.0)):
            now = time.monotonic()
            for t in list(self._open_trackers.values()):
                if now - self._last_line.get(id(t), t.started) >= self.interval_s and not t.closed:
                    self._print(t)

    def _refresh(self, t: Tracker) -> None:
        if not self.enabled:
            return
        if self.live:
            if t.handle is not None:
                self._rich().update(t.handle, completed=t.done, total=t.total, status=t.status())
        elif id(t) not in self._last_line or time.monotonic() - self._last_line[id(t)] >= self.interval_s:
            self._print(t)

    def _close(self, t: Tracker, *, aborted: bool = False) -> None:
        if not self.enabled:
            return
        if self.live:
            if t.handle is not None:
                self._rich().update(t.handle, completed=t.done, total=t.total if t.total is not None else t.done,
                                    status=t.status(timing=True))
        else:
            self._open_trackers.pop(id(t), None)
            if not aborted:
                self._print(t)
            self._last_line.pop(id(t), None)

    def _print(self, t: Tracker) -> None:
        with self._lock:
            self._last_line[id(t)] = time.monotonic()
            self.console.print(t.line(), markup=False, highlight=False, soft_wrap=True)

    def stop(self) -> None:
        if self._quiet is not None:
            self._quiet.set()
            self._quiet = None
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


def active() -> Reporter | None:
    """The innermost open reporter, or ``None``."""
    return _STACK[-1] if _STACK else None


@contextmanager
def reporting(console: Console | None = None, *, enabled: bool = True, live: bool | None = None,
              interval_s: float = 30.0) -> Iterator[Reporter]:
    """Show the progress of every :func:`track` inside the block (see the module docstring).

    Inside an open enabled reporter, ``reporting()`` joins it; ``enabled=False`` silences the block.
    """
    outer = active()
    if enabled and outer is not None and outer.enabled:
        yield outer
        return
    rep = Reporter(console, live=live, interval_s=interval_s, enabled=enabled)
    _STACK.append(rep)
    try:
        yield rep
    finally:
        _STACK.remove(rep)
        rep.stop()


def track(description: str, total: int | None = None, *, unit: str = "episodes") -> Tracker:
    """A tracker on the open reporter (silent when none is open)."""
    return Tracker(active(), description, total, unit)
