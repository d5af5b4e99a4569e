"""The progress helper (trace_gym.progress) and the stages that report through it."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from trace_gym.progress import Reporter, active, format_seconds, reporting, track


def _console(terminal: bool = False) -> Console:
    return Console(file=io.StringIO(), width=80, force_terminal=terminal, color_system=None)


def _text(console: Console) -> str:
    return console.file.getvalue()


def test_a_tracker_without_a_reporter_is_silent_and_still_counts():
    assert active() is None
    with track("quiet", total=3) as t:
        t.tick(1.0)
        t.tick(0.0)
        t.skip()
    assert (t.done, t.fresh, t.reward) == (3, 2, 0.5)


def test_plain_lines_when_not_a_terminal_are_few_and_complete():
    con = _console()
    with reporting(con, interval_s=3600) as rep:
        assert not rep.live
        with track("calibrate trace/x-v0", total=4) as t:
            for r in (1.0, 0.0, 1.0):
                t.tick({"reward": r})
            t.skip()
    lines = _text(con).strip().splitlines()
    assert len(lines) == 2, lines  # the first episode and the end; nothing in between within the interval
    assert lines[0].startswith("calibrate trace/x-v0: 1/4 episodes (25%)")
    assert lines[1].startswith("calibrate trace/x-v0: 4/4 episodes (100%) · done in ")
    assert "mean reward 0.667" in lines[1]  # the skipped (earlier-run) episode has no reward to count


def test_plain_lines_every_interval_show_count_reward_and_eta():
    con = _console()
    with reporting(con, interval_s=0), track("eval p on e", total=4) as t:
        t.tick(0.5)
        t.tick(0.5)
    lines = _text(con).strip().splitlines()
    assert "1/4 episodes (25%)" in lines[0] and "mean reward 0.500" in lines[0] and "ETA " in lines[0]
    assert "ETA ?" not in lines[0]  # one episode played: the rate is known
    assert "2/4 episodes (50%)" in lines[1]
    assert lines[2].startswith("eval p on e: 2/4 episodes (50%) · stopped after ")  # closed before the total


def test_an_exception_leaves_the_error_as_the_last_line():
    con = _console()
    with pytest.raises(RuntimeError), reporting(con, interval_s=3600), track("rollouts on z", total=3) as t:
        t.tick(1.0)
        raise RuntimeError("boom")
    assert _text(con).strip().splitlines() == [_text(con).strip().splitlines()[0]]  # the first episode's line only
    con = _console()
    with pytest.raises(RuntimeError), reporting(con), track("rollouts on z", total=3):
        raise RuntimeError("boom")
    assert _text(con) == ""  # nothing was done: nothing said


def test_eta_counts_only_this_runs_items():
    t = track("x", total=10)
    t.skip(5)
    assert t.eta() is None  # nothing played yet in this run
    t.started -= 10.0  # 10 s spent on ...
    t.tick()           # ... one episode: 4 left at 10 s each
    assert t.eta() == pytest.approx(40.0, rel=0.05)


def test_live_display_on_a_terminal_shows_the_line():
    con = _console(terminal=True)
    with reporting(con) as rep:
        assert rep.live
        with track("rollouts on trace/y-v0", total=2) as t:
            t.tick(1.0)
            t.tick(1.0)
    out = _text(con)
    assert "rollouts on trace/y-v0" in out and "2/2" in out and "mean reward 1.000" in out


def test_reporters_nest_into_one_display_and_can_be_silenced():
    con = _console()
    with reporting(con, interval_s=3600) as outer:
        with reporting() as inner:
            assert inner is outer
            track("joined", total=1).close()
        with reporting(enabled=False):
            track("silenced", total=1).close()
        assert active() is outer
    assert active() is None
    out = _text(con)
    assert "joined" in out and "silenced" not in out


def test_training_steps_show_the_latest_reward_and_a_note():
    con = _console()
    with reporting(con, interval_s=0), track("train a", total=4, unit="steps") as t:
        t.start_at(2)  # resumed at step 2
        t.update(3, reward=0.25, note="12 rollouts")
    line = _text(con).strip().splitlines()[-1]
    assert "train a: 3/4 steps" in line and "reward 0.250" in line and "12 rollouts" in line
    assert t.fresh == 1


def test_format_seconds():
    assert [format_seconds(s) for s in (None, 5, 65, 3700)] == ["?", "5s", "1m05s", "1h01m"]


def test_reporter_defaults_to_stderr():
    assert Reporter().console.stderr


def test_calibrate_reports_episodes_and_reward_through_the_hook():
    import trace_gym  # noqa: F401
    from trace_gym.capabilities.calibrate import ReferencePolicy, calibrate

    con = _console()
    with reporting(con, interval_s=3600):
        res = calibrate("trace/cap-refund-policy-v0", ReferencePolicy(), [0, 1], 2)
    last = _text(con).strip().splitlines()[-1]
    assert last.startswith("calibrate trace/cap-refund-policy-v0: 4/4 episodes (100%)")
    assert f"mean reward {res.mean_reward:.3f}" in last


class _Talker:
    """A policy that only talks (every episode ends at the step limit)."""

    policy_id = "talker"

    def act(self, messages, tools):
        return "Could you tell me more?"


def test_eval_reports_every_episode_and_resumed_ones(tmp_path):
    import trace_gym  # noqa: F401
    from trace_gym.eval.harness import evaluate

    store = tmp_path / "episodes.jsonl"
    kw = {"max_steps": 2}
    evaluate("trace/cap-refund-policy-v0", _Talker(), ["0"], 2, store=store, env_kwargs=kw)  # no reporter: silent
    con = _console()
    with reporting(con, interval_s=3600):
        rep = evaluate("trace/cap-refund-policy-v0", _Talker(), ["0", "1"], 2, store=store, env_kwargs=kw)
    lines = _text(con).strip().splitlines()
    assert lines[0].startswith("eval talker on trace/cap-refund-policy-v0: 1/4 episodes")  # a resumed one
    assert lines[-1].startswith("eval talker on trace/cap-refund-policy-v0: 4/4 episodes (100%)")
    new = [r for r in rep.rewards["1"]]  # the two episodes played in this run
    assert f"mean reward {sum(new) / 2:.3f}" in lines[-1]


def test_plain_mode_keeps_saying_something_while_a_step_runs_long():
    import threading
    import time

    def lines():
        return [ln for ln in _text(con).splitlines() if ln.startswith("warm start: SFT")]

    con = _console()
    before = set(threading.enumerate())
    with reporting(con, interval_s=0.2):
        with track("warm start: SFT", total=5, unit="steps") as t:
            t.update(0, note="loading the model")
            [beat] = [th for th in threading.enumerate() if th not in before and th.name == "trace-gym-progress"]
            deadline = time.monotonic() + 60  # a long step: nothing advances the tracker (a bound for a stuck run only)
            while len(lines()) < 3 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert len(lines()) >= 3 and all("loading the model" in ln for ln in lines()) and t.done == 0
    beat.join(timeout=60)
    assert not beat.is_alive()  # the heartbeat thread ends with the reporter: nothing is printed after it
