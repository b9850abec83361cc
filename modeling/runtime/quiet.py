"""Keeps TensorFlow's start-up noise off the scripts' stderr, unless the user asks for it.

TensorFlow prints lines on import and on first use of a device that no environment variable
turns off: its logging is not yet configured (`WARNING: All log messages before
absl::InitializeLog() is called are written to STDERR`), so `TF_CPP_MIN_LOG_LEVEL` does not
apply to them. On a machine without a GPU they include an error-level `failed call to cuInit`.
XLA's cache adds three false alarms at error level for every program it loads.
A user of our scripts should see our lines; TensorFlow's diagnostics when they ask for them.

`install()`, called by every script before anything imports TensorFlow:

- does nothing when `TF_CPP_MIN_LOG_LEVEL` is 0 or 1: the user asked for TensorFlow's
  information and warnings, and gets all of its output untouched;
- otherwise sets `TF_CPP_MIN_LOG_LEVEL=2` where it is unset (TensorFlow's own C++ INFO and
  WARNING lines off; its errors still show), drops the Python INFO records of TensorFlow and
  Keras (a SavedModel writer's "Function `<lambda>` contains input name(s) ..." and "Sharding
  callback duration"; their warnings and errors still show), and passes the process's stderr
  (file descriptor 2, so C++ writes too) through a filter that drops the lines of NOISE, and
  only those.

The filter is a forked process reading a pipe that replaces descriptor 2, not a thread: it
outlives a crash of the script (an abort, a segfault, SIGKILL) and forwards what was written
before it, so that a real error is never lost. It forwards every other line as it arrives, in
order, byte for byte (a line not ended within 0.1 s is forwarded as it is), and ends when
every writer of the pipe (the script and the processes it started) has exited. Only the
standard library and absl are used: importing this module imports no TensorFlow.

At exit the script does not wait for every writer: a process it started may outlive it
(multiprocessing's resource tracker holds the pipe until the script's own exit closes its
end), so waiting for the end of the pipe would wait for itself. It tells the filter on a
pipe of their own that it is done, and waits only until the filter has forwarded all the
script wrote (milliseconds); the filter goes on forwarding the others' lines until they end.

Setting TF_CPP_MIN_LOG_LEVEL alone is not enough: at 2 or 3 TensorFlow 2.21 still prints the
lines of NOISE (they come before its logging is configured). The filter costs one fork of a
small process, before TensorFlow is imported.
"""
import atexit
import importlib.util
import logging
import os
import re
import select
import signal
import sys

# Whole lines TensorFlow prints at start-up whatever TF_CPP_MIN_LOG_LEVEL says (and one notice
# it prints at error level), matched on the message after the log prefix
# ("I0000 00:00:1795476152.847596    1005 port.cc:153] ").
NOISE = tuple(re.compile(pattern) for pattern in (
    r"WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR",
    r"oneDNN custom operations are on\. ",
    r"Could not find cuda drivers on your machine, GPU will not be used\.",
    r"This TensorFlow binary is optimized to use available CPU instructions in "
    r"performance-critical operations\.",
    r"To enable the following instructions: .* in other operations, rebuild TensorFlow with "
    r"the appropriate compiler flags\.",
    r"Unable to register cu(DNN|FFT|BLAS) factory: Attempting to register factory for plugin "
    r"cu\w+ when one has already been registered",
    r"computation placer already registered\. Please check linkage and avoid linking the same "
    r"target more than once\.",
    r"TF-TRT Warning: Could not find TensorRT",
    # Error-level, but only a notice that int64 ops use Eigen's kernels (a SavedModel's lookups).
    r"oneDNN supports DT_INT64 only on platforms with AVX-512\. Falling back to the default "
    r"Eigen-based implementation if present\.",
    # Three error-level lines for every entry the XLA cache (--xla_cache_dir) loads, both false
    # alarms. TensorFlow tries each entry as a text proto before reading it as the binary one it
    # is. XLA then compares the CPU features the entry was compiled for with the host's, and
    # counts LLVM's tuning hints prefer-no-gather/-scatter among them, which no host lists
    # (openxla/xla#44565): it warns of SIGILL, then loads the entry. A missing instruction set
    # names another feature, and is shown.
    r"Error parsing text-format tensorflow\.XlaSerializedCacheEntry: ",
    r"Loading XLA:CPU AOT result\. Target machine feature \+prefer-no-(gather|scatter) is not "
    r"+supported on the host machine\.",
))
# The error that follows "Could not find cuda drivers", or that comes on a machine without
# NVIDIA's kernel driver: no driver, so no GPU to initialize (tf-nightly 2.23 prints it without
# that line before it, and with a source trace after it). On a machine with a driver cuInit
# failing is a real error, and shown.
NO_DRIVER = re.compile(r"Could not find cuda drivers on your machine")
NVIDIA_DRIVER = "/proc/driver/nvidia/version"
CUINIT = re.compile(r"failed call to cuInit: ")
# The lines an error of XLA's status may end with: a header (a space after it), source
# locations, a blank line.
TRACE_HEADER = "=== Source Location Trace: ==="
SOURCE_LOCATION = re.compile(r"\S+\.(cc|h):\d+$")
_LOG_PREFIX = re.compile(r"[IWEF]\d{4} [\d:.]+ +\d+ [\w.\-]+:\d+\] ")

# Libraries whose Python INFO records are TensorFlow's diagnostics, not our lines.
LIBRARIES = ("tensorflow", "keras", "tensorflow_text", "tf_keras")

_PARTIAL_LINE_SECONDS = 0.1
_DRAIN_SECONDS = 5.0  # the longest a script waits for the filter at exit (a filter stuck)
_installed = False


def asked_for_tensorflow_output(environ=os.environ):
    """True when TF_CPP_MIN_LOG_LEVEL is 0 or 1: the user wants TensorFlow's INFO/WARNINGs."""
    return environ.get("TF_CPP_MIN_LOG_LEVEL", "").strip() in ("0", "1")


def install():
    """Quiets TensorFlow's start-up for this process and its children; see the module doc.

    Call it first, before anything imports TensorFlow. A second call does nothing.
    """
    global _installed
    if _installed or asked_for_tensorflow_output():
        return
    _installed = True
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # TensorFlow logs both through its own logger and through absl's, which our scripts use.
    logging.getLogger("tensorflow").setLevel(logging.WARNING)
    from absl import logging as absl_logging
    absl_logging.get_absl_logger().addFilter(LibraryInfoFilter(_library_folders()))
    _filter_stderr()


class LibraryInfoFilter(logging.Filter):
    """Drops log records below WARNING made by code under `folders` (the libraries')."""

    def __init__(self, folders):
        super().__init__()
        self.folders = tuple(os.path.join(folder, "") for folder in folders)

    def filter(self, record):
        return record.levelno >= logging.WARNING or not record.pathname.startswith(self.folders)


def _library_folders():
    """The installed folders of LIBRARIES, found without importing them."""
    folders = []
    for name in LIBRARIES:
        spec = importlib.util.find_spec(name)
        folders += list(spec.submodule_search_locations or []) if spec else []
    return folders


def is_noise(line, no_driver_seen=False):
    """Whether `line` (text, without its end) is one of TensorFlow's start-up lines."""
    message = _LOG_PREFIX.sub("", line, count=1)
    if any(pattern.match(message) for pattern in NOISE):
        return True
    return no_driver_seen and bool(CUINIT.match(message))


class LineFilter:
    """Splits a byte stream into lines and drops the noise, with the source trace that may
    follow a dropped line; keeps the state NO_DRIVER needs."""

    def __init__(self, driver_installed=None):
        """Args: driver_installed: whether NVIDIA's kernel driver is loaded (default: whether
        this machine has NVIDIA_DRIVER)."""
        self.pending = b""
        if driver_installed is None:
            driver_installed = os.path.exists(NVIDIA_DRIVER)
        self.no_driver_seen = not driver_installed
        self.after_dropped = None  # "line" or "trace": what of a dropped message came last

    def feed(self, data):
        """Returns the bytes to forward now: the complete lines of `data` that are not noise."""
        self.pending += data
        out = []
        while True:
            end = min((i for i in (self.pending.find(b"\n"), self.pending.find(b"\r"))
                       if i >= 0), default=-1)
            if end < 0:
                return b"".join(out)
            line, self.pending = self.pending[:end + 1], self.pending[end + 1:]
            out.append(self._keep(line))

    def flush(self):
        """Returns the partial line held back, as it is."""
        line, self.pending = self.pending, b""
        return line

    def _keep(self, line):
        text = line.rstrip(b"\r\n").decode("utf-8", "replace")
        after, self.after_dropped = self.after_dropped, None
        if after == "line" and text.strip() == TRACE_HEADER or after == "trace" and (
                SOURCE_LOCATION.match(text) or not text):
            self.after_dropped = "trace" if text else None  # a blank line ends the trace
            return b""
        if NO_DRIVER.search(text) and _LOG_PREFIX.match(text):
            self.no_driver_seen = True
        if text and is_noise(text, self.no_driver_seen):
            self.after_dropped = "line"
            return b""
        return line


def _forward(read_fd, write_fd, done_fd, ack_fd):
    """Copies `read_fd` to `write_fd` through a `LineFilter` until end of file. When the
    script writes to `done_fd` (it is exiting), forwards what the pipe holds, partial line
    included, then closes `ack_fd`; the script waits for that."""
    line_filter = LineFilter()
    watched = [read_fd, done_fd]
    while True:
        timeout = _PARTIAL_LINE_SECONDS if line_filter.pending else None
        ready, _, _ = select.select(watched, [], [], timeout)
        if not ready:
            _write_all(write_fd, line_filter.flush())
            continue
        if done_fd in ready:
            watched.remove(done_fd)
            os.set_blocking(read_fd, False)
            ended = _forward_available(read_fd, write_fd, line_filter)
            _write_all(write_fd, line_filter.flush())
            os.close(ack_fd)
            os.set_blocking(read_fd, True)
            if ended:
                return
            continue
        data = os.read(read_fd, 65536)
        if not data:
            _write_all(write_fd, line_filter.flush())
            return
        _write_all(write_fd, line_filter.feed(data))


def _forward_available(read_fd, write_fd, line_filter):
    """Forwards what non-blocking `read_fd` holds now; True if the pipe has ended."""
    while True:
        try:
            data = os.read(read_fd, 65536)
        except BlockingIOError:
            return False
        if not data:
            return True
        _write_all(write_fd, line_filter.feed(data))


def _write_all(fd, data):
    while data:
        data = data[os.write(fd, data):]


def _filter_stderr():
    """Replaces descriptor 2 by a pipe that a forked filter process reads (see module doc)."""
    try:
        os.fstat(2)
    except OSError:  # started with stderr closed: nothing to filter
        return
    if sys.stderr is not None:
        sys.stderr.flush()
    read_fd, write_fd = os.pipe()
    done_read, done_write = os.pipe()  # the script's "I am exiting", and the filter's answer
    ack_read, ack_write = os.pipe()
    pid = os.fork()
    if pid == 0:
        # The filter. It ends at end of file, when every writer has exited: signals that a
        # terminal or `kill` send to the whole group are for the script, whose last words
        # (a traceback, say) it must still forward.
        code = 0
        try:
            for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
                signal.signal(signum, signal.SIG_IGN)
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, 0)
            os.dup2(null, 1)
            low = 3
            for kept in sorted((read_fd, done_read, ack_write)):
                os.closerange(low, kept)
                low = kept + 1
            os.closerange(low, _max_fd())
            _forward(read_fd, 2, done_read, ack_write)
        except BaseException:  # noqa: B036  nothing may escape into the script's code
            code = 1
        finally:
            os._exit(code)
    for fd in (read_fd, done_read, ack_write):
        os.close(fd)
    original = os.dup(2)
    os.set_inheritable(original, False)
    os.dup2(write_fd, 2)
    os.close(write_fd)
    atexit.register(_restore, os.getpid(), original, done_write, ack_read)


def _restore(installer, original, done_write, ack_read):
    """At exit: gives descriptor 2 back, tells the filter, and waits until it has forwarded
    what this process wrote. A process forked from the script runs this too, and skips it."""
    if os.getpid() != installer:
        return
    try:
        if sys.stderr is not None:
            sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os.dup2(original, 2)  # closes this process's end of the pipe
    os.close(original)
    try:
        os.write(done_write, b"x")
    except OSError:  # the filter is gone
        return
    # End of file on ack_read: the filter has forwarded what the pipe held, or has died.
    select.select([ack_read], [], [], _DRAIN_SECONDS)


def _max_fd():
    try:
        return os.sysconf("SC_OPEN_MAX")
    except (OSError, ValueError):
        return 1024
