"""Outputs that appear only when complete: each is written under a temporary name beside it and
renamed over it at the end, so a killed run leaves the old file or the new one, never half.
Local paths need no TensorFlow; remote ones (gs://...) go through `tf.io.gfile`.

The temporary name is `<path>.tmp-<pid>[-<tag>]` (`temp_path`), so that a leftover is
recognisable and a process can clean up its own; a writer that insists on a suffix (Keras'
`.keras`) gets it moved to the end (`atomic_path`).
"""
import contextlib
import os
import shutil


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


@contextlib.contextmanager
def atomic_write(path, mode="w", tag=""):
    """Opens a temporary file for writing; on success it replaces `path`, on error it goes.

    Text is UTF-8 and written as given, without newline translation (as `tf.io.gfile` writes
    remote files).
    """
    temp = temp_path(path, tag)
    try:
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
    temp = temp_path(str(path)[:len(str(path)) - len(suffix)], tag) + suffix
    try:
        yield temp
        replace(temp, path)
    except BaseException:
        remove_quietly(temp)
        raise


def write_eval_results(results, path, keys=None):
    """The original's eval_results.txt: `key = value` lines, in `keys` order, else sorted."""
    with atomic_write(path) as writer:
        for key in keys or sorted(results):
            writer.write(f"{key} = {results[key]}\n")
