"""Converts between Google's original checkpoints and the files Keras users load.

  # bert_model.ckpt -> Keras (a .keras model, or .weights.h5 for BertModel/BertPretrainer)
  python convert_checkpoint.py --bert_config_file=$BERT_DIR/bert_config.json \
    --input=$BERT_DIR/bert_model.ckpt --output=bert.keras

  # and back: .keras (or .weights.h5 plus --bert_config_file) -> original name-based checkpoint
  python convert_checkpoint.py --input=bert.keras --output=out/bert_model.ckpt

A checkpoint with the pre-training heads (`cls/...`) becomes a `BertPretrainer`, one without
a bare `BertModel`. Optimizer slots and `global_step` are dropped.
"""
from absl import flags, logging

from modeling import BertConfig, checkpoint, cli

FLAGS = flags.FLAGS
flags.DEFINE_string("input", None, "An original checkpoint prefix (or its directory), or a "
                    ".keras / .weights.h5 file.")
flags.DEFINE_string("output", None, "A .keras / .weights.h5 file, or a checkpoint prefix.")
flags.DEFINE_string("bert_config_file", None, "bert_config.json; needed unless --input is a "
                    ".keras file.")
flags.mark_flag_as_required("input")
flags.mark_flag_as_required("output")


def main(_):
    config = (BertConfig.from_json_file(FLAGS.bert_config_file)
              if FLAGS.bert_config_file else None)
    if FLAGS.input.endswith((".keras", ".weights.h5")):
        model = checkpoint.from_keras_file(FLAGS.input, FLAGS.output, config)
        logging.info("Wrote %d variables of %s to %s", len(model.weights), model.name,
                     FLAGS.output)
        return
    if config is None:
        raise ValueError("--bert_config_file is needed to read an original checkpoint")
    result = checkpoint.to_keras_file(config, FLAGS.input, FLAGS.output)
    logging.info("Wrote %d variables to %s; dropped %d optimizer tensors; unused: %s",
                 len(result.loaded), FLAGS.output, len(result.skipped), result.unused or "none")


if __name__ == "__main__":
    cli.run(main)
