"""Outputs that appear only when complete: each is written under a temporary name beside it and
renamed over it at the end, so a killed run leaves the old file or the new one, never half.
Local paths need no TensorFlow; remote ones (gs://...) go through `tf.io.gfile`."""
import contextlib
import os


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
    """Removes `path` if it exists: the temporary file of a write that failed."""
    try:
        if _is_remote(path):
            import tensorflow as tf
            tf.io.gfile.remove(path)
        else:
            os.remove(path)
    except (OSError, Exception):  # tf.errors.NotFoundError is no OSError
        pass


@contextlib.contextmanager
def atomic_write(path, mode="w", tag=""):
    """Opens a temporary file for writing; on success it replaces `path`, on error it goes."""
    temp = temp_path(path, tag)
    try:
        if _is_remote(path):
            import tensorflow as tf
            with tf.io.gfile.GFile(temp, mode) as writer:
                yield writer
        else:
            with open(temp, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as writer:
                yield writer
        replace(temp, path)
    except BaseException:
        remove_quietly(temp)
        raise


def write_eval_results(results, path, keys=None):
    """The original's eval_results.txt: `key = value` lines, in `keys` order, else sorted."""
    with atomic_write(path) as writer:
        for key in keys or sorted(results):
            writer.write(f"{key} = {results[key]}\n")
