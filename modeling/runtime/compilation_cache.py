"""Keeps what XLA compiles for a training run on disk, for the next run on this machine.

A training step's fused passes (`modeling.encoder.fused`, the optimizer's update) are compiled
by XLA once for each row count a run reaches: dozens of compilations in a fine-tuning run,
a sizeable part of a short run's time (benchmarks/history/finetuning_against_peer.md). TensorFlow
can keep each compiled program in a directory and load it when the same program comes again;
a second run, with other seeds or learning rates, then compiles almost nothing.

TensorFlow's cache is fragile to share, so no process writes into the shared one directly:
- TensorFlow writes an entry in place, not through a temporary file, and fails the run that
  reads a partial one ("Read less bytes than requested"): a run killed while writing, or two
  runs at once, would break every later run. Each process gets a private directory of the
  shared entries checked whole, and its new entries join the shared directory at exit, each by
  an atomic rename. The private directories live in the shared directory's `.runs`, named by
  host and process, so that a killed run's is removed by the next run on that host.
- The private directory holds hard links, not copies: TensorFlow writes an entry only where
  none exists under its name (one that exists is loaded, or fails the run), so it never writes
  through a link into a shared entry. Copies cost every run 1.7 s at start for a cache of
  4,000 entries (270 MB), links 0.14 s (benchmarks/history/xla_cache_start.md); a file system
  without hard links gets copies.
- The entries are machine code for this CPU: the shared directory is one per TensorFlow version
  and CPU (model and feature flags), so that a home directory shared between machines never
  hands one the other's code.
- A cache only grows (about 70 KB a compiled program, 1 MB a kept loop for MiniLM; this
  machine's reached 280 MB in two days of benchmarks and tests): past MAX_BYTES, a run's end
  removes the oldest entries. Neither TensorFlow nor a hard link says which entries a run read,
  so "oldest" is the time an entry was written; one still in use costs its next run one
  compilation, and is written anew.
"""
import atexit
import hashlib
import os
import platform
import shutil
import tempfile

from absl import logging

FLAG = "--tf_xla_persistent_cache_directory"
SUFFIX = ".pb"
RUNS = ".runs"  # the private directories of the processes using the cache
LOOPS = "loops"  # the training loops runs traced (`training.loop_cache`)
MAX_BYTES = 2 << 30  # of each shared directory: past it, the oldest entries are removed


def default_directory():
    """$XDG_CACHE_HOME (else ~/.cache)/bert_tf2/xla."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(root, "bert_tf2", "xla")


def machine_key():
    """A short name for this TensorFlow build and this CPU (model name and feature flags)."""
    import tensorflow as tf
    cpu = platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            cpu += "".join(sorted({line for line in info
                                   if line.startswith(("model name", "flags", "Features"))}))
    except OSError:
        cpu += platform.processor()
    return f"tf{tf.__version__}-{hashlib.sha256(cpu.encode()).hexdigest()[:16]}"


def loops_directory(directory):
    """Where the training loops traced by earlier runs are kept (`training.loop_cache`): beside
    the compiled programs of this TensorFlow build, or None without a cache."""
    return os.path.join(directory, machine_key(), LOOPS) if directory else None


def enable(directory):
    """Makes XLA load and keep compiled programs in `directory` (a subdirectory per machine).

    Call early: TensorFlow reads its XLA settings once, at the first compilation at the
    latest, and in a script under absl's `app.run` before `main` (`modeling.runtime.cli`
    calls this from the flag parser). A partial-looking cache entry is left out. Does nothing when
    `directory` is empty or TF_XLA_FLAGS already names a cache (the user's own, or this
    process's from an earlier call); a directory that cannot be made logs a warning, and the
    run compiles as without a cache.

    Returns:
      The shared directory in use, or None.
    """
    flags = os.environ.get("TF_XLA_FLAGS", "")
    if not directory or FLAG in flags:
        return None
    shared = os.path.join(directory, machine_key())
    runs = os.path.join(shared, RUNS)
    try:
        os.makedirs(runs, exist_ok=True)
        _remove_dead_runs(runs)
        private = tempfile.mkdtemp(prefix=f"{_host()}-{os.getpid()}-", dir=runs)
    except OSError as error:
        logging.warning("--xla_cache_dir: cannot use %s (%s); compiling without a cache",
                        shared, error.strerror or error)
        return None
    known = set()
    for name in _entries(shared):
        if _is_whole_message(os.path.join(shared, name)):
            try:
                _link_or_copy(os.path.join(shared, name), os.path.join(private, name))
            except OSError:  # compiled anew instead
                continue
            known.add(name)
    atexit.register(publish, private, shared, known)
    os.environ["TF_XLA_FLAGS"] = f"{flags} {FLAG}={private}".strip()
    return shared


def publish(private, shared, known=()):
    """Moves the entries this process compiled from `private` into `shared`, each written to a
    temporary file there first and renamed, then removes `private` and `prune`s `shared`.
    Errors are logged: a cache that cannot be written costs the next run its compilation, not
    this run its results."""
    try:
        for name in sorted(set(_entries(private)) - set(known)):
            temporary = None
            try:
                with tempfile.NamedTemporaryFile(dir=shared, prefix=".", suffix=".tmp",
                                                 delete=False) as target, \
                        open(os.path.join(private, name), "rb") as source:
                    temporary = target.name
                    shutil.copyfileobj(source, target)
                os.replace(temporary, os.path.join(shared, name))
            except OSError as error:
                logging.warning("--xla_cache_dir: cannot keep %s in %s (%s)", name, shared,
                                error.strerror or error)
                if temporary and os.path.exists(temporary):
                    os.remove(temporary)
    finally:
        shutil.rmtree(private, ignore_errors=True)
    prune(shared)


def prune(shared, max_bytes=None):
    """Where the compiled programs and kept loops in `shared` take more than `max_bytes`
    (None: MAX_BYTES), removes the oldest (by the time each was written) until they take at
    most 90% of it, so that the runs after do not prune again at once. Entries another process
    removes meanwhile are skipped; a process that linked an entry keeps reading its link."""
    entries = [(os.path.join(shared, name), [os.path.join(shared, name)])
               for name in _entries(shared)]
    loops = os.path.join(shared, LOOPS)
    for name in _listdir(loops):
        if not name.startswith("."):  # not a loop being written
            path = os.path.join(loops, name)
            entries.append((path, [os.path.join(path, file) for file in _listdir(path)]))
    written = []
    for path, files in entries:
        try:
            stats = [os.stat(file) for file in files]
        except OSError:
            continue
        written.append((max((s.st_mtime for s in stats), default=0.0),
                        sum(s.st_size for s in stats), path))
    total = sum(size for _, size, _ in written)
    max_bytes = MAX_BYTES if max_bytes is None else max_bytes
    if total <= max_bytes:
        return
    removed = 0
    for _, size, path in sorted(written):
        if total <= 0.9 * max_bytes:
            break
        try:
            if os.path.isdir(path):
                shutil.rmtree(path)
            else:
                os.remove(path)
        except FileNotFoundError:  # another process pruned it
            pass
        except OSError as error:
            logging.warning("--xla_cache_dir: cannot remove %s (%s)", path,
                            error.strerror or error)
            continue
        total -= size
        removed += 1
    logging.info("--xla_cache_dir: removed the %d oldest entries of %s, which held more than "
                 "%d MB", removed, shared, max_bytes >> 20)


def _listdir(directory):
    try:
        return os.listdir(directory)
    except OSError:
        return []


def _link_or_copy(source, target):
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def _host():
    return platform.node().replace("-", "_") or "host"


def _remove_dead_runs(runs):
    """Removes the private directories that processes of this host no longer running left."""
    for name in os.listdir(runs):
        host, _, rest = name.partition("-")
        pid = rest.partition("-")[0]
        if host != _host() or not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(os.path.join(runs, name), ignore_errors=True)
        except OSError:  # alive, another user's
            pass


def _entries(directory):
    return [name for name in _listdir(directory)
            if name.endswith(SUFFIX) and not name.startswith(".")]


def _is_whole_message(path):
    """Whether the file parses as protocol-buffer fields that end exactly at its end: a
    truncated entry, which TensorFlow would fail the run on, does not. Reads only the fields'
    headers (an entry has three: its key, its HLO, its machine code), not their contents."""
    try:
        with open(path, "rb") as file:
            end = os.fstat(file.fileno()).st_size

            def varint():
                value = 0
                for shift in range(0, 64, 7):
                    byte = file.read(1)
                    if not byte:
                        raise ValueError("truncated varint")
                    value |= (byte[0] & 0x7F) << shift
                    if not byte[0] & 0x80:
                        return value
                raise ValueError("varint of over 64 bits")

            while file.tell() < end:
                wire_type = varint() & 7
                if wire_type == 0:
                    varint()
                elif wire_type in (1, 2, 5):
                    size = {1: 8, 5: 4}.get(wire_type) or varint()
                    if file.tell() + size > end:
                        return False
                    file.seek(size, os.SEEK_CUR)
                else:
                    return False
    except (OSError, ValueError):
        return False
    return end > 0
