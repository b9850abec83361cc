"""Progress lines for long work: training steps, and passes over a known number of examples
(evaluation, prediction, feature extraction), each on a time cadence, with the rate and ETA.

The first batch of a pass or the first step of training includes tracing and compiling: it
says nothing about the pace, so no ETA comes from it.
"""
import time

from absl import logging


class TrainingProgress:
    """When to report training progress (every `seconds`, the first loop at once, so that a
    run shows life as soon as its step is compiled) and the elapsed time and ETA to print.

    The pace is that of the wall clock since the end of the first loop, checkpoints saved on
    the way included; the first loop's, which includes tracing and compiling, only bounds how
    many steps fit in `seconds` until a later loop has ended.
    """

    def __init__(self, step, total, seconds):
        self.step, self.total, self.seconds = step, total, seconds
        self.start = time.time()
        self.paced_from = None  # (time, step) at the end of the first loop
        self.first_seconds_per_step = None
        self.seconds_per_step = None  # measured after the first loop

    def steps_until_report(self):
        pace = self.seconds_per_step or self.first_seconds_per_step
        if pace is None:
            return 1
        return max(1, int(self.seconds / max(pace, 1e-9)))

    def done(self, steps, elapsed):
        """Counts a loop of `steps` steps that took `elapsed` seconds."""
        self.step += steps
        now = time.time()
        if self.paced_from is None:
            self.paced_from = (now, self.step)
            self.first_seconds_per_step = elapsed / steps
            return
        since, step_then = self.paced_from
        self.seconds_per_step = (now - since) / (self.step - step_then)

    def timing(self):
        elapsed = f"elapsed {clock(time.time() - self.start)}"
        if self.seconds_per_step is None:
            return elapsed + ", ETA at the next report"
        return f"{elapsed}, ETA {clock((self.total - self.step) * self.seconds_per_step)}"


class PassProgress:
    """Logs "<what>: done/total <unit>, rate/s, elapsed, ETA" every `seconds` of a pass, and a
    closing line if it reported at all: work shorter than `seconds` stays silent.

    Args:
      what: the pass's name in the log ("eval", "predict", "extract_features").
      total: the number of units the pass will see, or None if unknown (no ETA then).
      unit: what is counted ("examples", "batches").
    """

    def __init__(self, what, total, unit="examples", seconds=30.0):
        self.what, self.total, self.unit, self.seconds = what, total, unit, seconds
        self.done = 0
        self.start = self.last_report = time.time()
        self.paced_from = None  # (time, done) at the end of the first batch
        self.reported = False

    def add(self, count):
        self.done += count
        now = time.time()
        if self.paced_from is None:
            self.paced_from = (now, self.done)
        if now - self.last_report >= self.seconds:
            self.last_report = now
            self.reported = True
            logging.info("%s: %s, %s", self.what, self._count(), self._timing(now))

    def finish(self):
        if self.reported:
            elapsed = time.time() - self.start
            logging.info("%s: %d %s in %s, %.1f %s/s", self.what, self.done, self.unit,
                         clock(elapsed), self.done / max(elapsed, 1e-9), self.unit)

    def _count(self):
        return (f"{self.done}/{self.total} {self.unit}" if self.total
                else f"{self.done} {self.unit}")

    def _timing(self, now):
        elapsed = f"elapsed {clock(now - self.start)}"
        since, done_then = self.paced_from
        if now <= since or self.done <= done_then:
            return elapsed + ", ETA at the next report"
        rate = (self.done - done_then) / (now - since)
        line = f"{rate:.1f} {self.unit}/s, {elapsed}"
        if self.total:
            line += f", ETA {clock(max(self.total - self.done, 0) / rate)}"
        return line


def clock(seconds):
    """"m:ss", or "h:mm:ss" from an hour."""
    minutes, seconds = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes}:{seconds:02d}"
