"""The checkpoints a training run keeps in its output_dir, `ckpt-<step>` as
`tf.train.CheckpointManager` names them, and the `checkpoint` state file that lists them.

A run resumes from the checkpoints on disk, not from what the state file says: the files are
the run's work, the state file only an index of them that a copy, an edit or a run killed
between the two writes can leave naming a checkpoint that is not there, or garbage. Trusting
it would start afresh from `--init_checkpoint` and write over the intact checkpoints.
"""
import math
import os
import re

import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2
from absl import logging

from modeling.checkpoints import name_based
from modeling.runtime import files

NAME = "ckpt"
# What a training run saves its global batch size as, beside the model and optimizer.
BATCH_SIZE = "train_batch_size"


def on_disk(directory):
    """The prefixes of the `ckpt-<step>` checkpoints with an index in `directory`, by step."""
    if not tf.io.gfile.isdir(directory):
        return []
    steps = sorted(int(match.group(1)) for match in
                   (re.fullmatch(rf"{NAME}-(\d+)\.index", entry)
                    for entry in tf.io.gfile.listdir(directory)) if match)
    return [os.path.join(directory, f"{NAME}-{step}") for step in steps]


def check_batch_size(path, batch_size):
    """Raises ValueError when checkpoint `path` was saved by a run of another global batch
    size: a run counts its progress in batches of its size (the step reached, the data read),
    so another size would resume at the wrong place in the data, or find itself past its last
    step and train nothing. A checkpoint that does not say, or cannot be read, passes (its
    restore names any damage)."""
    try:
        reader = tf.train.load_checkpoint(path)
        saved = int(reader.get_tensor(f"{BATCH_SIZE}/.ATTRIBUTES/VARIABLE_VALUE"))
    except (tf.errors.OpError, ValueError):
        return
    if saved != batch_size:
        raise ValueError(
            f"--train_batch_size={batch_size}, but {path} was trained with "
            f"--train_batch_size={saved}, and a run resumes only with the batch size it started "
            f"with; rerun with --train_batch_size={saved}, or give another --output_dir to start "
            f"afresh")


def note_disagreement(directory, paths):
    """Logs one line when the state file does not name the newest of `paths` (the checkpoints
    on disk, by step), which the run goes by instead. Returns whether it agreed."""
    try:
        listed = name_based.read_state_file(directory)
    except ValueError as error:
        logging.warning("%s; going by the checkpoints on disk (%s)", error,
                        os.path.basename(paths[-1]) if paths else "none")
        return False
    named = os.path.basename(listed[-1]) if listed else None
    newest = os.path.basename(paths[-1]) if paths else None
    if named == newest:
        return True
    state = os.path.join(directory, name_based.STATE_FILE)
    if newest is None:
        logging.warning("%s names %s, which is not on disk; no checkpoint to resume from",
                        state, named)
    else:
        logging.warning("%s names %s, but the newest checkpoint on disk is %s; resuming from "
                        "the newest intact one on disk", state, named or "none", newest)
    return False


def rewrite_state(directory, paths):
    """Makes the state file list `paths` (the checkpoints kept, oldest first), with their
    files' times so that the `CheckpointManager` deletes the old ones beyond its
    `max_to_keep`; removes it when there are none."""
    if not paths:
        files.remove_quietly(os.path.join(directory, name_based.STATE_FILE))
        return
    times = [tf.io.gfile.stat(path + ".index").mtime_nsec / 1e9 for path in paths]
    name_based.write_state_file(directory, [os.path.basename(path) for path in paths], times)


def save(manager, step, variables):
    """`manager.save` of checkpoint `ckpt-<step>`; on any failure (a full disk, a kill) what
    it half wrote is removed, and a full disk is one `files.OutOfSpace` naming it.

    Args:
      variables: what the checkpoint holds, for the space it needs.
    """
    prefix = os.path.join(manager.directory, f"{NAME}-{step}")
    needed = sum(math.prod(v.shape) * tf.as_dtype(v.dtype).size for v in variables)
    try:
        with files.out_of_space(prefix, needed):
            manager.save(checkpoint_number=step)
    except BaseException:
        # TensorFlow writes into <prefix>_temp/, then moves the files to <prefix>.*.
        for leftover in tf.io.gfile.glob(prefix + ".*") + [prefix + "_temp"]:
            files.remove_quietly(leftover)
        raise


def difference(checkpoint, path, partial):
    """What the checkpoint at `path` differs in from the objects `checkpoint` would restore,
    read from its object graph without restoring anything: a restore that fails part way
    leaves TensorFlow warning, when the objects go, about every value it did not restore.

    Args:
      checkpoint: the `tf.train.Checkpoint` that would restore `path`.
      path: str, the checkpoint's prefix.
      partial: bool, whether objects the checkpoint lacks may stay as they are (a read for
        evaluation) rather than be a difference (a resumed training run).

    Returns:
      str naming a variable of another shape there (a weight rather than an optimizer's slot
      for it) or else an object missing there; None if the two match.
    """
    reader = tf.train.load_checkpoint(path)
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
    shapes = reader.get_variable_to_shape_map()
    view = tf.train.TrackableView(checkpoint)
    pending, seen, differences = [(0, checkpoint, "")], set(), []
    while pending:
        node_id, trackable, where = pending.pop()
        if node_id in seen:
            continue
        seen.add(node_id)
        node = graph.nodes[node_id]
        for attribute in node.attributes:
            if attribute.name == "VARIABLE_VALUE":
                theirs, ours = tuple(shapes[attribute.checkpoint_key]), tuple(trackable.shape)
                if theirs != ours:
                    # A weight, rather than an optimizer's slot for it, names the difference.
                    differences.append((not getattr(trackable, "trainable", False),
                                        f"{getattr(trackable, 'path', where)} is {theirs} "
                                        f"there, {ours} here"))
        there = {child.local_name: child.node_id for child in node.children}
        for name, child in reversed(view.children(trackable).items()):  # popped in order
            if name in there:
                pending.append((there[name], child, f"{where}/{name}".lstrip("/")))
            elif not partial:
                differences.append((True, f"{where}/{name}".lstrip("/") + " is not there"))
    return min(differences, key=lambda difference: difference[0])[1] if differences else None
