"""Outputs that appear only when complete: each is written under a temporary name beside it and
renamed over it at the end, so a killed run leaves the old file or the new one, never half.
Local paths need no TensorFlow; remote ones (gs://...) go through `tf.io.gfile`. The checks
that every script makes before any work are here too: outputs that can be written
(`check_outputs`, `check_writable_directory`), inputs that can be read (`check_input`).

The temporary name is `<path>.tmp-<pid>[-<tag>]` (`temp_path`), so that a leftover is
recognisable and a process can clean up its own; a writer that insists on a suffix (Keras'
`.keras`) gets it moved to the end (`atomic_path`). A full disk is one error naming the file
(`out_of_space`), which every writer goes through.
"""
import contextlib
import errno
import os
import shutil
import stat


def temp_path(path, tag=""):
    """The name `path` is written under: beside it (one file system, so the rename is atomic),
    marked with this process's id."""
    return f"{path}.tmp-{os.getpid()}" + (f"-{tag}" if tag else "")


def _is_remote(path):
    return "://" in str(path)


def replace(source, target):
    """Renames `source` over `target` atomically."""
    if _is_remote(target):
        import tensorflow as tf
        tf.io.gfile.rename(source, target, overwrite=True)
    else:
        os.replace(source, target)


def remove_quietly(path):
    """Removes `path` (a file, or a directory and its contents) if it exists: what a write that
    failed left under its temporary name."""
    try:
        if _is_remote(path):
            import tensorflow as tf
            if tf.io.gfile.isdir(path):
                tf.io.gfile.rmtree(path)
            else:
                tf.io.gfile.remove(path)
        elif os.path.isdir(path):
            shutil.rmtree(path)
        else:
            os.remove(path)
    except (OSError, Exception):  # tf.errors.NotFoundError is no OSError
        pass


class OutOfSpace(OSError):
    """A write that found its disk full (or over quota): `out_of_space` names the file."""

    def __str__(self):
        return self.strerror  # the message, without OSError's "[Errno 28] "


# How a full disk reads in the errors of Python (errno), TensorFlow (ResourceExhaustedError)
# and h5py (OSError without an errno): the C library's messages for ENOSPC and EDQUOT.
_FULL = (os.strerror(errno.ENOSPC), os.strerror(errno.EDQUOT))


@contextlib.contextmanager
def out_of_space(path, needed=None):
    """Turns a full disk while writing `path` into one `OutOfSpace` that names it, the space
    it needed (`needed` bytes, when known) and the space left; other errors pass unchanged.
    The writer removes what it half wrote, as it does on any error."""
    try:
        yield
    except Exception as error:
        if isinstance(error, OutOfSpace) or not (
                getattr(error, "errno", None) in (errno.ENOSPC, errno.EDQUOT)
                or any(text in str(error) for text in _FULL)):
            raise
        space = f"about {_size(needed)} needed, " if needed else ""
        raise OutOfSpace(errno.ENOSPC, f"{path}: no space left on device to write it ({space}"
                         f"{_free(path)}); nothing of it was kept") from None


def _free(path):
    directory = os.path.dirname(os.path.abspath(path))
    if _is_remote(path) or not os.path.isdir(directory):
        return "the space left is unknown"
    return f"{_size(shutil.disk_usage(directory).free)} free in {directory}"


def _size(count):
    for unit in ("bytes", "KB", "MB", "GB"):
        if count < 1000 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count /= 1000


def make_parent(path):
    """Makes the directory `path` is to be written in, if missing."""
    if _is_remote(path):
        import tensorflow as tf
        tf.io.gfile.makedirs(os.path.dirname(str(path)))
    else:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)


@contextlib.contextmanager
def atomic_write(path, mode="w", tag=""):
    """Opens a temporary file for writing; on success it replaces `path`, on error it goes.

    Text is UTF-8 and written as given, without newline translation (as `tf.io.gfile` writes
    remote files). A missing directory is made, as `check_outputs` found it could be.
    """
    temp = temp_path(path, tag)
    try:
        with out_of_space(path):
            make_parent(path)
            if _is_remote(path):
                import tensorflow as tf
                with tf.io.gfile.GFile(temp, mode) as writer:
                    yield writer
            else:
                text = {} if "b" in mode else {"encoding": "utf-8", "newline": ""}
                with open(temp, mode, **text) as writer:
                    yield writer
            replace(temp, path)
    except BaseException:
        remove_quietly(temp)
        raise


@contextlib.contextmanager
def atomic_path(path, tag="", suffix=""):
    """Yields a temporary path for a writer that takes a path (a Keras file, a SavedModel
    directory); on success it replaces `path`, on error it goes.

    Args:
      path: the final file or directory. A directory must not exist yet: a rename cannot
        replace a non-empty one.
      tag: marks the temporary name, as in `temp_path`.
      suffix: an ending the writer insists on (Keras' ".keras"), moved from `path` to the end
        of the temporary name: `model.tmp-<pid>.keras`.
    """
    if suffix and not str(path).endswith(suffix):
        raise ValueError(f"{path} does not end in {suffix}")
    stem = str(path)[:len(str(path)) - len(suffix)]
    remove_stale_temps(stem, suffix)  # a killed writer's half-written file or directory
    temp = temp_path(stem, tag) + suffix
    try:
        with out_of_space(path):
            make_parent(path)
            yield temp
            replace(temp, path)
    except BaseException:
        remove_quietly(temp)
        raise


def rename_unless_taken(source, target):
    """Renames the non-empty directory `source` to `target` unless that is taken, claimed by
    the rename itself (no check before it), so that writers racing for one name (two exports
    in one second) cannot both have it. Returns whether it was renamed."""
    if _is_remote(target):  # no atomic rename there: a check is all there is
        import tensorflow as tf
        if tf.io.gfile.exists(target):
            return False
        tf.io.gfile.rename(source, target)
        return True
    try:
        os.rename(source, target)
    except OSError as error:
        if error.errno in (errno.EEXIST, errno.ENOTEMPTY):
            return False
        raise
    return True


def write_eval_results(results, path, keys=None):
    """The original's eval_results.txt: `key = value` lines, in `keys` order, else sorted."""
    with atomic_write(path) as writer:
        for key in keys or sorted(results):
            writer.write(f"{key} = {results[key]}\n")


def same_file(a, b):
    """Whether two local paths name one file or directory (through links too), existing or not."""
    a, b = os.path.realpath(a), os.path.realpath(b)
    if a == b:
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def check_outputs(outputs, inputs=(), flag="--output_file"):
    """Refuses, before any work, outputs that would harm an input or cannot be written: the
    same path twice, a path that is (a link to) an input, a directory, a path under a file,
    or a directory that cannot be written. Remote paths are checked for duplicates only.

    Raises:
      ValueError: naming the flag and the path.
    """
    seen = set()
    for path in outputs:
        key = os.path.realpath(path) if not _is_remote(path) else path
        if key in seen:
            raise ValueError(f"{flag} names {path} twice")
        seen.add(key)
        if _is_remote(path):
            continue
        for source in inputs:
            if not _is_remote(source) and same_file(path, source):
                raise ValueError(f"{flag}={path} is also an input; refusing to write over it")
        if os.path.isdir(path):
            raise ValueError(f"{flag}={path} is a directory, not a file")
        check_writable_directory(os.path.dirname(os.path.abspath(path)), flag, path)


def check_writable_directory(directory, flag, path=None):
    """Refuses a directory that cannot be made or written, naming the flag and the path.

    Writing is tried (a file made and removed in the nearest existing directory): permission
    bits say nothing to root, who still cannot write under /proc or on a read-only mount.
    """
    path = path or directory
    if _is_remote(directory):
        return
    existing = os.path.abspath(directory)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise ValueError(f"{flag}={path}: {existing} is a file, not a directory")
    # A name `remove_stale_temps_in` knows, should this process die before removing it.
    probe = temp_path(os.path.join(existing, ".write-check"))
    try:
        os.close(os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except OSError as error:
        raise ValueError(f"{flag}={path}: {existing} is not writable ({error.strerror})") \
            from None
    os.remove(probe)


def check_input(path, flag, value=None):
    """Refuses, before any work, an input file that cannot be read: one that does not exist,
    is a directory, is no regular file (a pipe, `/dev/stdin`: see `_not_regular`), or cannot be
    opened. Remote paths are left to their reader.

    Args:
      path: the input file.
      flag: the flag that names it, "--vocab_file".
      value: the flag's value, where `path` was found from it (a file in --data_dir).

    Raises:
      ValueError: naming the flag and the path.
    """
    if _is_remote(path):
        return
    where = f"{flag}={value}: {path}" if value is not None else f"{flag}={path}"
    if not os.path.exists(path):
        raise ValueError(f"{where} does not exist")
    if os.path.isdir(path):
        raise ValueError(f"{where} is a directory, not a file")
    if not os.path.isfile(path):
        raise ValueError(f"{where} is {_not_regular(path)}, not a regular file, and the "
                         f"scripts read their inputs more than once; write it to a file first "
                         f"and name that")
    try:
        open(path, "rb").close()
    except OSError as error:
        raise ValueError(f"{where} cannot be read ({error.strerror})") from None


def _not_regular(path):
    """What a path that exists but is no regular file or directory is, in words. It is stat'ed,
    never opened: opening a pipe waits for its writer, and reading it takes what the run needs."""
    mode = os.stat(path).st_mode
    for test, kind in ((stat.S_ISFIFO, "a pipe"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return "a special file"


def remove_stale_temps(path, suffix=""):
    """Removes the temporary files that killed runs left beside `path` (`<path>.tmp-<pid>...`
    of a process that is gone, ending in `suffix`: see `atomic_path`): a rerun cleans up after
    the run it replaces."""
    directory, name = os.path.split(os.path.abspath(path))
    _remove_stale(directory, lambda entry: entry.startswith(f"{name}.tmp-")
                  and entry.endswith(suffix))


def remove_stale_temps_in(directory):
    """`remove_stale_temps` for every output in `directory` (a run's output_dir)."""
    _remove_stale(directory, lambda entry: ".tmp-" in entry)


def _remove_stale(directory, wanted):
    if _is_remote(directory) or not os.path.isdir(directory):
        return
    for entry in os.listdir(directory):
        if not wanted(entry):
            continue
        pid = entry.rsplit(".tmp-", 1)[1].split("-", 1)[0].split(".", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            remove_quietly(os.path.join(directory, entry))


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
