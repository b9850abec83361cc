"""What every export shares: the module base that TF Serving's loader restores, the checks of
serving inputs, the label table asset and the versioned, atomic save."""
import os
import shutil
import tempfile
import time
import weakref

import tensorflow as tf

from modeling.export import warmup
from modeling.runtime import files

LABELS_ASSET = "labels.txt"


class ServingModule(tf.Module):
    """The base of every export: tracks the Keras model's `tf.Variable`s, not the model.

    A Keras 3 variable is a wrapper around a `tf.Variable`. Saved as part of the object graph,
    the wrapper writes a second graph variable (a copy initialized from the first) and the
    SavedModel's restore op (`saver_def`) restores that copy, while the signatures read the
    wrapped variable, which nothing restores: TF Serving's loader and `saved_model_cli` then
    fail with "Could not find variable ...". Tracking the wrapped variables themselves gives
    one graph variable each, restored by the restore op and read by the signatures.

    Every export sets `tokenizer` (its `GraphTokenizer`) and `max_seq_length`, from which its
    warm-up requests are made.
    """

    def __init__(self, model, name):
        super().__init__(name=name)
        # Set past tf.Module's attribute tracking so that no Keras object is saved.
        object.__setattr__(self, "model", model)
        self.model_variables = [_wrapped_variable(v) for v in model.variables]

    def signatures(self):
        """The serving signatures: a dict of name -> `tf.function` with an input signature."""
        raise NotImplementedError

    def warmup_batches(self):
        """The rows of TF Serving's warm-up requests (`modeling.export.warmup`), short and long.

        Returns:
          (texts, ids): `warmup.sample_texts` for the text signatures and `warmup.sample_ids`
          for the `ids` signatures, of the export's vocabulary and max_seq_length.
        """
        vocab = self.tokenizer.vocab
        return (warmup.sample_texts(vocab, self.max_seq_length),
                warmup.sample_ids(vocab, self.tokenizer.cls_id, self.tokenizer.sep_id,
                                  self.max_seq_length))


def _wrapped_variable(variable):
    """The `tf.Variable` inside a Keras variable (read outside any autocast scope)."""
    value = variable.value
    if not isinstance(value, tf.Variable):
        raise TypeError(f"{variable.path}: expected a tf.Variable inside, got {type(value)}")
    return value


def checked_rows(inputs, ranks=None):
    """A signature's string inputs, each of the rank it declares and all of one number of
    rows, checked when the graph runs: the one check of every text signature.

    TF Serving's loader, and a loaded signature called directly, feed a placeholder whatever
    shape the request has, while shape inference has already assumed the declared rank (so
    `tf.rank` would be folded to it). The check compares element counts instead: the product
    of the first `rank` dimensions (-1 where the tensor has fewer) must equal its size. The
    rows are compared on those dimensions (never sliced from a shape that may have none), and
    only once every rank is right, so that the input at fault is the one named.

    Args:
      inputs: dict of input name -> string Tensor, in the signature's order.
      ranks: dict of input name -> declared rank, for those not of rank 1.

    Returns:
      The tensors in `inputs`' order, each reshaped to its first `rank` dimensions after the
      checks (an empty batch fed with fewer dimensions, `endings=[]` say, becomes [0, 0]).
    """
    dims, rank_checks = {}, []
    for name, tensor in inputs.items():
        rank = (ranks or {}).get(name, 1)
        dims[name] = tf.concat([tf.shape(tensor), -tf.ones([rank], tf.int32)], axis=0)[:rank]
        shape = "[batch]" if rank == 1 else "[batch, choices]"
        rank_checks.append(tf.debugging.Assert(
            tf.equal(tf.reduce_prod(dims[name]), tf.size(tensor)),
            [f"input '{name}' must be a {rank}-D tensor of strings {shape}; got shape",
             tf.shape(tensor)]))
    first, *others = inputs
    with tf.control_dependencies(rank_checks):
        row_checks = [tf.debugging.Assert(tf.equal(dims[first][0], dims[name][0]), [
            f"inputs '{first}' and '{name}' must have the same number of rows; got",
            dims[first][0], "and", dims[name][0]]) for name in others]
    # The checks become control inputs of an identity of each input, which grappler passes on
    # to its consumers when it drops the identity. A reshape made under the checks gets none
    # where its shape was computed there too (TF skips a control input that an input implies),
    # and grappler drops a reshape to rank 1 of a declared rank-1 input as a no-op: the checks
    # went with it, and the rows were read off a scalar before any check ran.
    with tf.control_dependencies(rank_checks + row_checks):
        checked = [tf.identity(tensor) for tensor in inputs.values()]
    return [tf.reshape(tensor, tf.maximum(dims[name], 0))
            for name, tensor in zip(inputs, checked)]


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
    label id (int64) to name, initialized from that asset when the SavedModel loads.

    The file lives in a temporary directory until saving copies it into the SavedModel's
    `assets/`; the directory goes when the asset does (or at exit), not left behind by every
    export."""
    directory = tempfile.mkdtemp(prefix="labels_")
    labels_file = os.path.join(directory, LABELS_ASSET)
    with open(labels_file, "w", encoding="utf-8") as writer:
        writer.writelines(f"{name}\n" for name in label_names)
    asset = tf.saved_model.Asset(labels_file)
    weakref.finalize(asset, shutil.rmtree, directory, ignore_errors=True)
    table = tf.lookup.StaticHashTable(tf.lookup.TextFileInitializer(
        asset, tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER, tf.string,
        tf.lookup.TextFileIndex.WHOLE_LINE), default_value="")
    return asset, table


def save_versioned(module, export_dir):
    """Saves `module` to `export_dir/<version>/`, the layout TF Serving watches, atomically:
    the version (seconds since the epoch, as the Estimator's, or the next one free) appears
    only once complete, with its warm-up requests (`assets.extra/tf_serving_warmup_requests`).

    It is written as `<version>.tmp-<pid>`, a name TF Serving does not take for a version, and
    the version is claimed by the rename at the end: an export finished meanwhile (another
    process, the same second) keeps its own. What killed exports left is removed first.

    Returns:
      The version directory.
    """
    tf.io.gfile.makedirs(export_dir)
    files.remove_stale_temps_in(export_dir)
    version = int(time.time())
    final = os.path.join(export_dir, str(version))
    temp = files.temp_path(final)
    try:
        with files.out_of_space(final):
            signatures = module.signatures()
            tf.saved_model.save(module, temp, signatures=signatures)
            warmup.write_requests(temp, signatures, *module.warmup_batches())
        while not files.rename_unless_taken(temp, final):
            version += 1
            final = os.path.join(export_dir, str(version))
        return final
    except BaseException:
        files.remove_quietly(temp)
        raise
