"""One training run at a time in an output_dir.

Two runs training into one folder would each resume from and write over the other's
checkpoints, and both train every step. A training run holds `<output_dir>/training.lock`
from before its first write to its end: an `fcntl.flock`, which the kernel drops when the
process ends, however it ends. So a killed run leaves no lock in force, only the file, which
the next run takes over; and a lock is never mistaken for live because its pid was reused.
The file says who holds it, for the message that refuses a second run.
"""
import contextlib
import datetime
import fcntl
import os
import socket
import sys

from absl import logging

from modeling.runtime import files

LOCK_FILE = "training.lock"


@contextlib.contextmanager
def held(output_dir):
    """Holds `output_dir`'s lock (the directory exists) for the block.

    Remote directories (gs://...) have no locks: they are not locked.

    Raises:
      ValueError: a live run holds it; names the run.
    """
    if "://" in output_dir:
        yield
        return
    path = os.path.join(output_dir, LOCK_FILE)
    descriptor = _take(path, output_dir)
    try:
        yield
    finally:
        # Removed while still locked: a run that opened it meanwhile sees, once it has the
        # lock, that the file is gone, and makes its own (see `_take`).
        files.remove_quietly(path)
        os.close(descriptor)


def _take(path, output_dir):
    while True:
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(descriptor) or "a run that has not yet said who it is"
            os.close(descriptor)
            raise ValueError(f"--output_dir={output_dir} is in use by another training run "
                             f"({holder}; {path}); wait for it to end, or give this run "
                             f"another --output_dir") from None
        try:
            current = os.path.samestat(os.fstat(descriptor), os.stat(path))
        except FileNotFoundError:
            current = False
        if current:
            break
        os.close(descriptor)  # its holder ended and removed it as we opened it: again
    previous = _holder(descriptor)
    if previous:
        logging.warning("Took over %s from %s, which is no longer running", path, previous)
    started = datetime.datetime.now().isoformat(sep=" ", timespec="seconds")
    record = (f"{os.path.basename(sys.argv[0]) or 'python'}, pid {os.getpid()} on "
              f"{socket.gethostname()}, started {started}")
    os.ftruncate(descriptor, 0)
    os.pwrite(descriptor, record.encode() + b"\n", 0)
    return descriptor


def _holder(descriptor):
    """Who the lock file says holds it ('' when it is empty)."""
    content = os.pread(descriptor, 1000, 0)
    return content.decode("utf-8", "replace").strip()
