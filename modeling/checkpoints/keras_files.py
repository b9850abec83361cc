"""Original checkpoints to Keras files (`.keras`, `.weights.h5`) and back.

Above `name_based` (which knows no model class): these pick the model a checkpoint holds.
"""
import os
import zipfile

import keras
import tensorflow as tf

from modeling.checkpoints import name_based
from modeling.encoder.bert_model import BertModel
from modeling.models.pretraining import BertPretrainer
from modeling.runtime import files

KERAS_SUFFIXES = (".weights.h5", ".keras")


def model_for_checkpoint(config, ckpt_path):
    """A `BertPretrainer` when the checkpoint carries the pre-training heads, else a `BertModel`."""
    names = name_based.open_checkpoint(ckpt_path).shapes
    has_heads = any(name.startswith("cls/") for name in names)
    return BertPretrainer(config) if has_heads else BertModel(config)


def to_keras_file(config, ckpt_path, output_path):
    """Converts an original checkpoint to a `.keras` model or `.weights.h5` file, atomically.

    Returns:
      The `LoadResult` of reading the checkpoint.

    Raises:
      ValueError: the output ends in neither suffix, or the checkpoint does not fit.
    """
    model = model_for_checkpoint(config, ckpt_path)
    result = name_based.load_original(model, ckpt_path)
    suffix = next((s for s in KERAS_SUFFIXES if output_path.endswith(s)), None)
    if suffix is None:
        raise ValueError(f"{output_path}: the output must end in .keras or .weights.h5")
    tf.io.gfile.makedirs(os.path.dirname(output_path) or ".")
    # Keras insists on the suffix: the temporary file is <name>.tmp-<pid><suffix>.
    with files.atomic_path(output_path, suffix=suffix) as temp:
        if suffix == ".keras":
            model.save(temp)
        else:
            model.save_weights(temp)
    return result


def from_keras_file(input_path, ckpt_path, config=None):
    """Converts a `.keras` file, or a `.weights.h5` file plus its config, to an original checkpoint.

    A `.weights.h5` file is tried with the pre-training heads first, then as a bare encoder.

    Returns:
      The model read.
    """
    if input_path.endswith(".keras"):
        _check_exists(input_path)
        if not zipfile.is_zipfile(input_path):
            raise ValueError(f"{input_path}: not a .keras file (a .keras file is a zip archive; "
                             f"this one is damaged, truncated or of another kind)")
        try:
            model = keras.saving.load_model(input_path)
        except (OSError, zipfile.BadZipFile, KeyError, ValueError) as error:
            raise ValueError(f"{input_path}: cannot be read as a Keras model "
                             f"({_first_line(error)})") from None
    elif input_path.endswith(".weights.h5"):
        if config is None:
            raise ValueError(f"{input_path}: a .weights.h5 file needs --bert_config_file")
        _check_exists(input_path)
        _check_hdf5(input_path)
        errors = []
        for model_class in (BertPretrainer, BertModel):
            model = model_class(config)
            try:
                model.load_weights(input_path)
                break
            except ValueError as error:
                errors.append(f"as {model_class.__name__}: {error}")
        else:
            raise ValueError(f"{input_path} does not fit the config: " + " | ".join(errors))
    else:
        raise ValueError(f"{input_path}: expected a .keras or .weights.h5 file")
    name_based.save_original(model, ckpt_path)
    return model


def _check_exists(path):
    if not os.path.isfile(path):
        raise ValueError(f"{path} does not exist")


def _check_hdf5(path):
    """Opens the file as HDF5 first, so a damaged one is named in one line."""
    import h5py
    try:
        with h5py.File(path, "r"):
            pass
    except OSError as error:
        raise ValueError(f"{path}: not a readable .weights.h5 file ({_first_line(error)})") \
            from None


def _first_line(error):
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:300]
