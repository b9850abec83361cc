"""What every export shares: the module base that TF Serving's loader restores, the checks of
serving inputs, the label table asset and the versioned, atomic save."""
import os
import tempfile
import time

import tensorflow as tf

from modeling import files

LABELS_ASSET = "labels.txt"


class ServingModule(tf.Module):
    """The base of every export: tracks the Keras model's `tf.Variable`s, not the model.

    A Keras 3 variable is a wrapper around a `tf.Variable`. Saved as part of the object graph,
    the wrapper writes a second graph variable (a copy initialized from the first) and the
    SavedModel's restore op (`saver_def`) restores that copy, while the signatures read the
    wrapped variable, which nothing restores: TF Serving's loader and `saved_model_cli` then
    fail with "Could not find variable ...". Tracking the wrapped variables themselves gives
    one graph variable each, restored by the restore op and read by the signatures.
    """

    def __init__(self, model, name):
        super().__init__(name=name)
        # Set past tf.Module's attribute tracking so that no Keras object is saved.
        object.__setattr__(self, "model", model)
        self.model_variables = [_wrapped_variable(v) for v in model.variables]

    def signatures(self):
        """The serving signatures: a dict of name -> `tf.function` with an input signature."""
        raise NotImplementedError


def _wrapped_variable(variable):
    """The `tf.Variable` inside a Keras variable (read outside any autocast scope)."""
    value = variable.value
    if not isinstance(value, tf.Variable):
        raise TypeError(f"{variable.path}: expected a tf.Variable inside, got {type(value)}")
    return value


def checked_rows(tensor, name, rank=1):
    """`tensor` with the rank its signature declares, checked when the graph runs.

    TF Serving's loader feeds a signature's placeholder whatever shape the request has, and
    shape inference has already assumed the declared rank (so `tf.rank` would be folded to it).
    The check compares element counts instead: the product of the first `rank` dimensions
    (-1 where the tensor has fewer) must equal its size.

    Args:
      tensor: a Tensor of declared rank `rank`.
      name: the signature input's name, for the error message.
      rank: the declared rank.

    Returns:
      `tensor` reshaped to its first `rank` dimensions, after the check (an empty batch fed
      with fewer dimensions, `endings=[]` say, becomes [0, 0]).
    """
    dims = tf.concat([tf.shape(tensor), -tf.ones([rank], tf.int32)], axis=0)[:rank]
    shape = "[batch]" if rank == 1 else "[batch, choices]"
    check = tf.debugging.Assert(
        tf.equal(tf.reduce_prod(dims), tf.size(tensor)),
        [f"input '{name}' must be a {rank}-D tensor of strings {shape}; got shape",
         tf.shape(tensor)])
    with tf.control_dependencies([check]):
        return tf.reshape(tensor, tf.maximum(dims, 0))


def check_same_rows(first, first_name, second, second_name):
    """Asserts that two inputs have the same number of rows (batch size)."""
    rows_first, rows_second = tf.shape(first)[0], tf.shape(second)[0]
    return tf.debugging.Assert(tf.equal(rows_first, rows_second), [
        f"inputs '{first_name}' and '{second_name}' must have the same number of rows; got",
        rows_first, "and", rows_second])


def checked_ids(input_ids, input_mask, segment_ids):
    """The `ids` signature's inputs after checking that they have one shape [B, T]."""
    checks = [tf.debugging.Assert(
        tf.reduce_all(tf.equal(tf.shape(value), tf.shape(input_ids))),
        [f"input '{name}' must have the shape of 'input_ids'; got", tf.shape(value), "and",
         tf.shape(input_ids)]) for name, value in (("input_mask", input_mask),
                                                    ("segment_ids", segment_ids))]
    with tf.control_dependencies(checks):
        return tf.identity(input_ids), input_mask, segment_ids


def label_table(label_names):
    """The label names as a `labels.txt` asset (one per line, in id order) and a table from
    label id (int64) to name, initialized from that asset when the SavedModel loads."""
    labels_file = os.path.join(tempfile.mkdtemp(prefix="labels_"), LABELS_ASSET)
    with open(labels_file, "w", encoding="utf-8") as writer:
        writer.writelines(f"{name}\n" for name in label_names)
    asset = tf.saved_model.Asset(labels_file)
    table = tf.lookup.StaticHashTable(tf.lookup.TextFileInitializer(
        asset, tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER, tf.string,
        tf.lookup.TextFileIndex.WHOLE_LINE), default_value="")
    return asset, table


def save_versioned(module, export_dir):
    """Saves `module` to `export_dir/<version>/`, the layout TF Serving watches, atomically:
    the version (seconds since the epoch, as the Estimator's) appears only once complete.

    Returns:
      The version directory.
    """
    tf.io.gfile.makedirs(export_dir)
    version = int(time.time())
    while tf.io.gfile.exists(os.path.join(export_dir, str(version))):
        version += 1
    final = os.path.join(export_dir, str(version))
    # Written as <version>.tmp-<pid>, a name TF Serving does not take for a version.
    with files.atomic_path(final) as temp:
        tf.saved_model.save(module, temp, signatures=module.signatures())
    return final
