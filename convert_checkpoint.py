r"""Converts Google's original checkpoints to and from Keras files and Hugging Face folders.

  # Hugging Face folder (config.json, model.safetensors or pytorch_model.bin, vocab.txt) ->
  # original checkpoint, with bert_config.json and vocab.txt beside it
  python convert_checkpoint.py --input=$HF_DIR --output=out/bert_model.ckpt

  # and back: original checkpoint (bert_config.json and vocab.txt beside it, or the flags) ->
  # a Hugging Face folder that transformers loads into the matching class
  python convert_checkpoint.py --input=out/bert_model.ckpt --output=$HF_DIR

  # bert_model.ckpt -> Keras (a .keras model, or .weights.h5 for BertModel/BertPretrainer)
  python convert_checkpoint.py --bert_config_file=$BERT_DIR/bert_config.json \
    --input=$BERT_DIR/bert_model.ckpt --output=bert.keras

  # and back: .keras (or .weights.h5 plus --bert_config_file) -> original name-based checkpoint
  python convert_checkpoint.py --input=bert.keras --output=out/bert_model.ckpt

  # original checkpoint or Hugging Face folder -> keras-hub preset folder (needs the
  # keras-hub extra); a model keras-hub computes otherwise is refused without
  # --keras_hub_approximate
  python convert_checkpoint.py --input=$BERT_DIR/bert_model.ckpt --to_keras_hub \
    --max_seq_length=128 --output=$PRESET_DIR

  # and back: keras-hub preset (a BertBackbone, BertTextClassifier or BertMaskedLM) ->
  # original checkpoint, with bert_config.json and vocab.txt beside it
  python convert_checkpoint.py --input=$PRESET_DIR --output=out/bert_model.ckpt

A checkpoint with the pre-training heads (`cls/...`) becomes a `BertPretrainer`, one without
a bare `BertModel`. Optimizer slots and `global_step` are dropped.
"""
from modeling.runtime import cpu_kernels, quiet

cpu_kernels.choose()  # before TensorFlow loads: the CPU kernels measured fastest
quiet.install()  # before TensorFlow loads: its start-up noise off stderr

import os
import tempfile

import tensorflow as tf
from absl import flags, logging

from modeling import BertConfig
from modeling.checkpoints import (huggingface, huggingface_config, keras_files, keras_hub_presets,
                                  name_based)
from modeling.runtime import cli, files

FLAGS = flags.FLAGS
flags.DEFINE_string("input", None, "A Hugging Face folder (with config.json), an original "
                    "checkpoint prefix (or its directory), or a .keras / .weights.h5 file.")
flags.DEFINE_string("output", None, "A checkpoint prefix, a Hugging Face folder, or a .keras "
                    "/ .weights.h5 file.")
flags.DEFINE_string("bert_config_file", None, "bert_config.json of an original checkpoint; "
                    "by default the one beside it (to a Hugging Face folder), needed for a "
                    ".weights.h5 or to Keras.")
flags.DEFINE_string("vocab_file", None, "vocab.txt of an original checkpoint going to a "
                    "Hugging Face folder; by default the one beside it.")
flags.DEFINE_enum("gelu", "exact", list(huggingface_config.GELU_CHOICES), "From Hugging Face: write its "
                  "exact 'gelu' as 'gelu_exact' (its numbers), or as the original's tanh "
                  "'gelu' (approximate: runs in the original code, with other numbers).")
flags.DEFINE_enum("hf_architecture", None, list(huggingface_config.ARCHITECTURES), "To Hugging Face: "
                  "the class of a checkpoint with root output_weights (run_classifier's, "
                  "run_ner's, run_multiple_choice's head); by default the one bert_config.json "
                  "names, else BertForSequenceClassification.")
flags.DEFINE_bool("do_lower_case", True, "To Hugging Face: whether its tokenizer lower-cases "
                  "(uncased models).")
flags.DEFINE_bool("to_keras_hub", False, "Write --output as a keras-hub preset folder (from an "
                  "original checkpoint or a Hugging Face folder); needs the keras-hub extra.")
flags.DEFINE_bool("keras_hub_approximate", False, "To keras-hub: convert a model whose "
                  "activation or LayerNorm epsilon keras-hub's BertBackbone computes otherwise "
                  "(a Hugging Face model's exact GELU), with a warning of the measured "
                  "difference, instead of refusing it.")
flags.DEFINE_integer("max_seq_length", None, "To keras-hub: the sequence length of the preset's "
                     "preprocessor; by default max_position_embeddings.")
flags.mark_flag_as_required("input")
flags.mark_flag_as_required("output")

_KERAS_SUFFIXES = (".keras", ".weights.h5")


def _is_hf_folder(path):
    """A folder with config.json, or with no original checkpoint in it."""
    return os.path.isdir(path) and (os.path.isfile(os.path.join(path, "config.json"))
                                    or not tf.io.gfile.glob(os.path.join(path, "*.index")))


def _beside(ckpt_path, flag_value, filename):
    """A flag's file, or the one of that name in the checkpoint's folder."""
    if flag_value:
        return flag_value
    ckpt_path = name_based.resolve_checkpoint(ckpt_path)
    path = os.path.join(os.path.dirname(ckpt_path), filename)
    if not os.path.isfile(path):
        flag = "bert_config_file" if filename == "bert_config.json" else "vocab_file"
        raise ValueError(f"{path}: not found; pass --{flag}")
    return path


def _check_output(input_path, output):
    """Refuses, before any work, an output that is the input, or a Keras file's name for the
    original checkpoint that a Hugging Face folder or a Keras file converts to: that is two
    files, <prefix>.index and <prefix>.data-00000-of-00001, and a .keras beside them would be
    no Keras file."""
    if "://" not in input_path + output and files.same_file(input_path, output):
        raise ValueError(f"--output={output} is also the input; refusing to write over it")
    keras_input = next((s for s in _KERAS_SUFFIXES if input_path.endswith(s)), None)
    source = ("a Hugging Face folder" if _is_hf_folder(input_path) else
              f"a {keras_input} file" if keras_input else None)
    if source and output.endswith(_KERAS_SUFFIXES):
        prefix = os.path.join(os.path.dirname(output), "bert_model.ckpt")
        raise ValueError(f"--output={output}: {source} converts to an original checkpoint, "
                         f"the files <prefix>.index and <prefix>.data-00000-of-00001, not to a "
                         f"Keras file; give a checkpoint prefix, such as --output={prefix}")


def _checkpoint_files(prefix):
    """What a conversion to an original checkpoint wrote: its index and data files."""
    return " and ".join([prefix + ".index"] + tf.io.gfile.glob(prefix + ".data-*"))


def _check_paths(to_hf_folder):
    """Refuses, before anything is read, an input file that cannot be read and an output that
    cannot be written (a folder for Hugging Face, else a file or checkpoint prefix)."""
    for name in ("bert_config_file", "vocab_file"):
        if FLAGS[name].value:
            files.check_input(FLAGS[name].value, f"--{name}")
    if to_hf_folder:
        files.check_writable_directory(FLAGS.output, "--output")
    else:
        files.check_outputs([FLAGS.output], [FLAGS.input], "--output")


def _to_keras_hub():
    """An original checkpoint or a Hugging Face folder -> a keras-hub preset folder."""
    if os.path.exists(FLAGS.output):
        raise ValueError(f"--output={FLAGS.output} exists; a preset is written as a new folder")
    files.check_writable_directory(os.path.dirname(os.path.abspath(FLAGS.output)), "--output")
    keras_hub_presets.import_keras_hub()  # the extra's absence is one line, before any work
    options = dict(do_lower_case=FLAGS.do_lower_case, sequence_length=FLAGS.max_seq_length,
                   approximate=FLAGS.keras_hub_approximate)
    if _is_hf_folder(FLAGS.input):
        with tempfile.TemporaryDirectory() as temp:
            # Read with the model's own activation, so that keras-hub's is measured against it.
            ckpt = os.path.join(temp, "bert_model.ckpt")
            huggingface.hf_to_original(FLAGS.input, ckpt, "exact")
            result = keras_hub_presets.original_to_preset(
                ckpt, FLAGS.output, BertConfig.from_json_file(os.path.join(temp, "bert_config.json")),
                os.path.join(temp, "vocab.txt"), **options)
    else:
        config_file = _beside(FLAGS.input, FLAGS.bert_config_file, "bert_config.json")
        result = keras_hub_presets.original_to_preset(
            FLAGS.input, FLAGS.output, BertConfig.from_json_file(config_file),
            _beside(FLAGS.input, FLAGS.vocab_file, "vocab.txt"), **options)
    logging.info("Wrote %s as a keras-hub %s preset (%d tensors; max |keras-hub - ours| on a "
                 "probe batch: %s); skipped: %s", FLAGS.output, result.kind,
                 len(result.converted), keras_hub_presets.describe(result.difference),
                 ", ".join(result.skipped) or "nothing")


def _from_keras_hub():
    """A keras-hub preset folder -> an original checkpoint."""
    files.check_outputs([FLAGS.output], [], "--output")
    result = keras_hub_presets.preset_to_original(FLAGS.input, FLAGS.output)
    logging.info("Wrote %s (%s, %d tensors) with bert_config.json and vocab.txt; the scripts "
                 "read it with --do_lower_case=%s", _checkpoint_files(FLAGS.output),
                 result.kind, len(result.converted), result.lowercase)


def main(_):
    if FLAGS.to_keras_hub:
        return _to_keras_hub()
    if keras_hub_presets.is_preset(FLAGS.input):
        return _from_keras_hub()
    from_hf, from_keras = _is_hf_folder(FLAGS.input), FLAGS.input.endswith(_KERAS_SUFFIXES)
    to_hf = not (from_hf or from_keras or FLAGS.output.endswith(_KERAS_SUFFIXES))
    _check_output(FLAGS.input, FLAGS.output)
    _check_paths(to_hf)
    if from_hf:
        result = huggingface.hf_to_original(FLAGS.input, FLAGS.output, FLAGS.gelu)
        logging.info("Wrote %s (%s, %d tensors) with bert_config.json and vocab.txt; skipped: "
                     "%s", _checkpoint_files(FLAGS.output), result.architecture,
                     len(result.converted),
                     ", ".join(result.skipped) or "nothing")
        return
    config = (BertConfig.from_json_file(FLAGS.bert_config_file)
              if FLAGS.bert_config_file else None)
    if from_keras:
        model = keras_files.from_keras_file(FLAGS.input, FLAGS.output, config)
        logging.info("Wrote %d variables of %s to %s", len(model.weights), model.name,
                     _checkpoint_files(FLAGS.output))
        return
    if to_hf:
        config_file = _beside(FLAGS.input, FLAGS.bert_config_file, "bert_config.json")
        result = huggingface.original_to_hf(
            FLAGS.input, FLAGS.output, BertConfig.from_json_file(config_file),
            _beside(FLAGS.input, FLAGS.vocab_file, "vocab.txt"), FLAGS.hf_architecture,
            FLAGS.do_lower_case)
        logging.info("Wrote %s as %s (%d tensors); skipped: %s", FLAGS.output,
                     result.architecture, len(result.converted),
                     ", ".join(result.skipped) or "nothing")
        return
    if config is None:
        raise ValueError("--bert_config_file is needed to read an original checkpoint")
    result = keras_files.to_keras_file(config, FLAGS.input, FLAGS.output)
    logging.info("Wrote %d variables to %s; dropped %d optimizer tensors; unused: %s",
                 len(result.loaded), FLAGS.output, len(result.skipped), result.unused or "none")


if __name__ == "__main__":
    cli.run(main)
