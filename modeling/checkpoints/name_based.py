"""Original TF1 name-based checkpoints (`bert_model.ckpt`) in and out, strictly.

A variable's Keras `path` is its original checkpoint name, so loading is a plain copy by name:
nothing is renamed or transposed. This module knows no model class (`keras_files` picks one).
"""
import contextlib
import dataclasses
import os
import re

import tensorflow as tf
from absl import logging

from modeling.runtime import files

# Training state the original writes beside the weights; never part of a model.
_OPTIMIZER_STATE = re.compile(r"(^|/)global_step$|/adam_[mv]$|/(lamb_[mv]|Momentum)$")


@dataclasses.dataclass
class LoadResult:
    """What `load_original` did with each checkpoint tensor.

    Attributes:
      loaded: names copied into the model.
      skipped: optimizer state and `global_step`, ignored by design.
      unused: other tensors the model has no variable for (a classifier's `output_weights`
        when loading into a bare `BertModel`, say); reported, not fatal.
      not_found: optional model variables the checkpoint does not have (a task head's, when
        starting from a pre-trained checkpoint); they keep their initial values.
    """
    loaded: list
    skipped: list
    unused: list
    not_found: list = dataclasses.field(default_factory=list)


def checkpoint_name(variable):
    """The original checkpoint name of a Keras variable: its path, without a `:0` suffix."""
    return variable.path.split(":")[0]


def _named_variables(model):
    """Maps checkpoint names to the model's variables; two variables with one name is a bug."""
    by_name = {}
    for variable in model.weights:
        name = checkpoint_name(variable)
        if name in by_name and by_name[name] is not variable:
            raise ValueError(f"Two variables of {model.name} share the checkpoint name {name}")
        by_name[name] = variable
    return by_name


def resolve_checkpoint(ckpt_path):
    """Accepts a checkpoint prefix or a directory.

    A directory resolves to the latest checkpoint its `checkpoint` state file names if that is
    there or, as in Google's released zips, which carry no state file, to its only `*.index`
    checkpoint.
    """
    ckpt_path = os.fspath(ckpt_path)
    if tf.io.gfile.isdir(ckpt_path):
        try:
            names = read_state_file(ckpt_path)
        except ValueError as error:
            logging.warning("%s; looking for the checkpoint itself", error)
            names = []
        latest = os.path.join(ckpt_path, names[-1]) if names else None
        if latest and tf.io.gfile.exists(latest + ".index"):
            return latest
        indexes = tf.io.gfile.glob(os.path.join(ckpt_path, "*.index"))
        if len(indexes) != 1:
            raise ValueError(f"No single checkpoint in directory {ckpt_path}: found "
                             f"{len(indexes)} *.index files and no 'checkpoint' state file "
                             f"naming one of them")
        return indexes[0][:-len(".index")]
    if not tf.io.gfile.exists(ckpt_path + ".index"):
        if ckpt_path.endswith((".keras", ".weights.h5")) and tf.io.gfile.exists(ckpt_path):
            # The scripts read original checkpoints only; the converter writes one.
            raise ValueError(f"{ckpt_path} is a Keras file, not an original checkpoint (a "
                             f"prefix with .index and .data files); convert it with "
                             f"convert_checkpoint.py --input={ckpt_path} "
                             f"--output=<dir>/bert_model.ckpt and pass that prefix")
        raise ValueError(f"Checkpoint {ckpt_path} not found ({ckpt_path}.index does not exist)")
    return ckpt_path


class UnreadableCheckpoint(ValueError):
    """A checkpoint file that TensorFlow cannot read: truncated, overwritten, bit-flipped."""


class CheckpointReader:
    """A checkpoint's tensors, read so that a damaged file is named (see `open_checkpoint`).

    Attributes:
      path: the checkpoint prefix.
      shapes: dict, tensor name -> shape (list of int).
      data: the name of its data file (`<path>.data-00000-of-00001`), for messages.
    """

    def __init__(self, path):
        self.path = path
        with reading(path + ".index"):
            self._reader = tf.train.load_checkpoint(path)
            self.shapes = self._reader.get_variable_to_shape_map()
        shards = sorted(tf.io.gfile.glob(path + ".data-*"))
        self.data = shards[0] if len(shards) == 1 else path + ".data-*"

    def get_tensor(self, name):
        """The tensor `name` as a NumPy array."""
        with reading(self.data):
            return self._reader.get_tensor(name)

    def verify(self, names):
        """Checks the tensors `names` against the checksums the index keeps of them, as
        TensorFlow does on every read: a reader that skips a tensor (an Adam slot) would
        otherwise pass over damage that the next reader of the file meets. One tensor is
        held at a time.

        Raises:
          UnreadableCheckpoint: naming the data file and the tensor whose bytes are damaged.
        """
        for name in names:
            try:
                self.get_tensor(name)
            except UnreadableCheckpoint as error:
                raise UnreadableCheckpoint(f"{error}, in tensor {name}") from None


def open_checkpoint(ckpt_path):
    """Opens a checkpoint (a prefix or its directory, as `resolve_checkpoint`) for reading.

    Every reader of a checkpoint, original or written by the trainer, goes through here (and
    `reading` around its own reads of the data, as `tf.train.Checkpoint.read`): TensorFlow
    reports a damaged file as `IndexError: Read less bytes than requested` or `not an sstable
    (bad magic number)`, naming no file.

    Raises:
      ValueError: the checkpoint is not there. UnreadableCheckpoint: its index is damaged.
    """
    return CheckpointReader(resolve_checkpoint(ckpt_path))


@contextlib.contextmanager
def reading(filename):
    """Turns TensorFlow's errors on reading a damaged checkpoint file into one
    `UnreadableCheckpoint` that names `filename` (the file being read) and TensorFlow's reason."""
    try:
        yield
    except (tf.errors.OpError, IndexError) as error:
        raise UnreadableCheckpoint(f"{filename}: not a readable checkpoint file "
                                   f"({first_line(error)})") from None


def first_line(error):
    """The first line of an error's message, without TensorFlow's op decorations."""
    text = (getattr(error, "message", None) or str(error)).strip() or type(error).__name__
    return re.sub(r"^\{\{function_node [^}]*\}\}\s*|\s*\[Op:\w+\]$", "",
                  text.splitlines()[0])[:300]


def load_original(model, ckpt_path, optional=(), allow_fewer_layers=False):
    """Copies an original name-based checkpoint into `model`, strictly.

    Every model variable must be present with the same shape, and is assigned exactly once;
    only the names in `optional` may be absent.

    Args:
      model: a `BertModel`, or any Keras model whose variables have checkpoint names.
      ckpt_path: checkpoint prefix (`.../bert_model.ckpt`) or its directory.
      optional: checkpoint names of variables that may be missing (a fine-tuning head's, which
        a pre-trained checkpoint does not have, as the original's `init_checkpoint`).
      allow_fewer_layers: bool, whether a model of fewer encoder layers than the checkpoint
        takes its first ones (the rest are dropped, in one logged line) instead of being
        refused.

    Returns:
      A `LoadResult`.

    Raises:
      ValueError: a model variable is missing from the checkpoint or has another shape (the
        message lists every such name with both shapes), or the model has fewer encoder
        layers than the checkpoint and `allow_fewer_layers` is False.
    """
    reader = open_checkpoint(ckpt_path)
    ckpt_path, ckpt_shapes = reader.path, reader.shapes
    variables = _named_variables(model)

    not_found = sorted(name for name in variables
                       if name not in ckpt_shapes and name in optional)
    missing = sorted(name for name in variables
                     if name not in ckpt_shapes and name not in optional)
    mismatched = sorted(
        f"{name}: model {tuple(variables[name].shape)} vs checkpoint {tuple(ckpt_shapes[name])}"
        for name in variables
        if name in ckpt_shapes and tuple(variables[name].shape) != tuple(ckpt_shapes[name]))
    dropped = _dropped_layers(variables, ckpt_shapes, ckpt_path, model.name, allow_fewer_layers)
    if missing or mismatched:
        lines = [f"Checkpoint {ckpt_path} does not fit model {model.name}:"]
        lines += [f"  missing from checkpoint: {name} {tuple(variables[name].shape)}"
                  for name in missing]
        lines += [f"  shape mismatch: {line}" for line in mismatched]
        raise ValueError("\n".join(lines))

    for name, variable in variables.items():
        if name not in not_found:
            variable.assign(tf.cast(reader.get_tensor(name), variable.dtype))

    leftovers = sorted(name for name in ckpt_shapes if name not in variables)
    skipped = [name for name in leftovers if is_optimizer_state(name)]
    unused = [name for name in leftovers if not is_optimizer_state(name)
              and not _in_layers(name, dropped)]
    reader.verify(leftovers)
    if unused:
        logging.warning("Checkpoint %s: %d tensors not used by %s: %s", ckpt_path, len(unused),
                        model.name, ", ".join(unused))
    return LoadResult(loaded=sorted(set(variables) - set(not_found)), skipped=skipped,
                      unused=unused, not_found=not_found)


_LAYER = re.compile(r"^bert/encoder/layer_(\d+)/")


def _layer_count(names):
    return len({match.group(1) for match in map(_LAYER.match, names) if match})


def _in_layers(name, layers):
    match = _LAYER.match(name)
    return bool(match) and int(match.group(1)) in layers


def _dropped_layers(variables, ckpt_shapes, ckpt_path, model_name, allow_fewer_layers):
    """The checkpoint's encoder layers a model of fewer layers leaves out (a range, empty
    when it has as many). Without `allow_fewer_layers` that is refused: the layers left over
    would be dropped without a word but the routine "tensors not used" line, and a model cut
    short is no model the checkpoint was trained as, unless asked for. (More layers than the
    checkpoint are missing tensors, which the caller lists.)"""
    model_layers, ckpt_layers = _layer_count(variables), _layer_count(ckpt_shapes)
    if not 0 < model_layers < ckpt_layers:
        return range(0)
    if not allow_fewer_layers:
        raise ValueError(f"Checkpoint {ckpt_path} has {ckpt_layers} encoder layers but model "
                         f"{model_name} has {model_layers} (num_hidden_layers of the config); "
                         f"its last {ckpt_layers - model_layers} would go unused: pass the "
                         f"checkpoint's own bert_config.json, or --allow_fewer_layers to "
                         f"start from its first {model_layers}")
    logging.info("Checkpoint %s has %d encoder layers, model %s %d (--allow_fewer_layers): "
                 "loaded layers 0 to %d, dropped layers %d to %d", ckpt_path, ckpt_layers,
                 model_name, model_layers, model_layers - 1, model_layers, ckpt_layers - 1)
    return range(model_layers, ckpt_layers)


def save_original(model, ckpt_path, global_step=None, extra_tensors=None):
    """Writes the model's variables as an original name-based checkpoint, atomically.

    The files (`<ckpt_path>.index`, `<ckpt_path>.data-00000-of-00001`, and the directory's
    `checkpoint` state file) read with `tf.train.load_checkpoint` and with the original TF1 code.

    Args:
      model: a `BertModel`, or any Keras model whose variables have checkpoint names.
      ckpt_path: checkpoint prefix to write, e.g. `out/bert_model.ckpt`.
      global_step: optional int, written as the int64 `global_step` tensor as the original does.
      extra_tensors: optional dict of more name -> tensor or variable (Adam slots, say).
    """
    variables = dict(_named_variables(model), **(extra_tensors or {}))
    tensors = {name: variables[name] for name in sorted(variables)}
    if global_step is not None:
        tensors["global_step"] = tf.constant(global_step, tf.int64)
    write_tensors(tensors, ckpt_path)


def write_tensors(tensors, ckpt_path):
    """Writes a dict of name -> tensor (variable, Tensor or NumPy array) as an original
    checkpoint, as atomically as two files allow, in the dict's order (sorted names give the
    original Saver's bytes).

    A checkpoint is a pair, `<ckpt_path>.index` and its `.data-*` shard, that no rename
    replaces at once; the index holds the offsets of each tensor in the data. Both are written
    under a temporary prefix (`files.temp_path`), then: an old index at `ckpt_path` is removed,
    the data renamed over the old data, the index renamed last, and the directory's
    `checkpoint` state file written after them. A run killed in between leaves no index (a
    checkpoint that is not found, as if never written), never an old index beside new data,
    which would read as wrong tensors; a reader that finds the index, or the state file naming
    the prefix, finds complete files.
    """
    names = list(tensors)
    values = [tf.convert_to_tensor(getattr(tensors[name], "value", tensors[name]))
              for name in names]
    directory = os.path.dirname(ckpt_path) or "."
    tf.io.gfile.makedirs(directory)
    temp_prefix = files.temp_path(ckpt_path)
    needed = sum(value.shape.num_elements() * value.dtype.size for value in values)
    try:
        with files.out_of_space(ckpt_path, needed):
            tf.raw_ops.SaveV2(prefix=temp_prefix, tensor_names=names,
                              shape_and_slices=[""] * len(names), tensors=values)
        if tf.io.gfile.exists(ckpt_path + ".index"):
            tf.io.gfile.remove(ckpt_path + ".index")
        for data in tf.io.gfile.glob(temp_prefix + ".data-*"):
            files.replace(data, ckpt_path + data[len(temp_prefix):])
        files.replace(temp_prefix + ".index", ckpt_path + ".index")
    finally:
        for leftover in tf.io.gfile.glob(temp_prefix + ".*"):  # of a failed write
            files.remove_quietly(leftover)
    write_state_file(directory, [os.path.basename(ckpt_path)])


def is_optimizer_state(name):
    """True for the training state the original writes beside the weights (`global_step`,
    Adam or LAMB slots): never part of a model."""
    return bool(_OPTIMIZER_STATE.search(name))


STATE_FILE = "checkpoint"


def read_state_file(directory):
    """The checkpoints that `directory`'s `checkpoint` state file lists, as written (names
    relative to `directory`, or absolute), the latest last; [] when there is no state file.

    Raises:
      ValueError: the file is no state file (not UTF-8 text, or naming no checkpoint); names it.
    """
    path = os.path.join(directory, STATE_FILE)
    if not tf.io.gfile.exists(path):
        return []
    with tf.io.gfile.GFile(path, "rb") as reader:
        content = reader.read()
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not a checkpoint state file (not UTF-8 text)") from None
    latest = re.findall(r'^model_checkpoint_path: "(.*)"\s*$', text, re.MULTILINE)
    if len(latest) != 1:
        raise ValueError(f"{path} is not a checkpoint state file (no model_checkpoint_path)")
    listed = re.findall(r'^all_model_checkpoint_paths: "(.*)"\s*$', text, re.MULTILINE)
    return [name for name in listed if name != latest[0]] + latest


def write_state_file(directory, names, timestamps=()):
    """Writes the `checkpoint` text file that `tf.train.latest_checkpoint` and
    `tf.train.CheckpointManager` read, atomically.

    Args:
      names: checkpoint prefixes relative to `directory`, the latest last.
      timestamps: their creation times (seconds since the epoch), if known: a
        `CheckpointManager` deletes beyond its `max_to_keep` only the checkpoints listed
        with a time.
    """
    lines = [f'model_checkpoint_path: "{names[-1]}"']
    lines += [f'all_model_checkpoint_paths: "{name}"' for name in names]
    lines += [f"all_model_checkpoint_timestamps: {time!r}" for time in timestamps]
    with files.atomic_write(os.path.join(directory, STATE_FILE)) as writer:
        writer.write("\n".join(lines) + "\n")
