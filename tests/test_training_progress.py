"""Progress lines of training, of passes over examples (eval, predict, extract_features), and
their clock."""
import re

from modeling.training import progress


def _messages(caplog):
    return [record.getMessage() for record in caplog.records]


def test_training_says_no_eta_until_steps_after_the_first_have_a_pace(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(progress.time, "time", lambda: now[0])
    meter = progress.TrainingProgress(0, 141, seconds=30)
    assert meter.steps_until_report() == 1
    now[0] += 16  # the first step: tracing and compiling
    meter.done(1, 16.0)
    assert meter.timing() == "elapsed 0:16, ETA at the next report"
    assert meter.steps_until_report() == 1  # at most one step of the first's pace fits in 30 s
    now[0] += 0.125
    meter.done(1, 0.125)
    assert meter.timing() == "elapsed 0:16, ETA 0:17"  # 139 steps of 0.125 s, not of ~8 s
    assert meter.steps_until_report() == 240
    now[0] += 29 * 0.125 + 2.0  # 29 steps, then a checkpoint saved before the next loop
    meter.done(29, 29 * 0.125)
    assert meter.timing() == "elapsed 0:22, ETA 0:21"  # 110 steps of 5.75 / 30 s


def test_a_pass_reports_count_rate_and_eta_then_a_closing_line(caplog, monkeypatch):
    now = [100.0]
    monkeypatch.setattr(progress.time, "time", lambda: now[0])
    meter = progress.PassProgress("eval", 1000, "examples", seconds=10)
    with caplog.at_level("INFO", logger="absl"):
        now[0] += 20  # the first batch: tracing and compiling
        meter.add(100)
        now[0] += 10  # 100 examples in 10 s from here on
        meter.add(100)
        now[0] += 10
        meter.add(100)
        meter.finish()
    lines = _messages(caplog)
    assert lines[0] == "eval: 100/1000 examples, elapsed 0:20, ETA at the next report"
    assert lines[1] == "eval: 200/1000 examples, 10.0 examples/s, elapsed 0:30, ETA 1:20"
    assert lines[2] == "eval: 300/1000 examples, 10.0 examples/s, elapsed 0:40, ETA 1:10"
    assert lines[3] == "eval: 300 examples in 0:40, 7.5 examples/s"


def test_a_pass_shorter_than_the_cadence_is_silent(caplog):
    meter = progress.PassProgress("predict", 10, "examples", seconds=3600)
    with caplog.at_level("INFO", logger="absl"):
        for _ in range(10):
            meter.add(1)
        meter.finish()
    assert not _messages(caplog)


def test_an_unknown_total_gives_no_eta(caplog, monkeypatch):
    now = [0.0]
    monkeypatch.setattr(progress.time, "time", lambda: now[0])
    meter = progress.PassProgress("eval", None, "batches", seconds=1)
    with caplog.at_level("INFO", logger="absl"):
        for _ in range(3):
            now[0] += 2
            meter.add(1)
    assert _messages(caplog)[-1] == "eval: 3 batches, 0.5 batches/s, elapsed 0:06"


def test_clock():
    assert [progress.clock(s) for s in (0, 59.6, 61, 3600, 3725)] == [
        "0:00", "1:00", "1:01", "1:00:00", "1:02:05"]
    assert re.fullmatch(r"\d+:\d\d", progress.clock(599))
