r"""Writes BERT activations for each input line as JSON lines, as the original script does.

Input lines are `text` or `text_a ||| text_b`. Example:

  python extract_features.py --input_file=input.txt --output_file=output.jsonl \
    --vocab_file=$BERT_BASE_DIR/vocab.txt --bert_config_file=$BERT_BASE_DIR/bert_config.json \
    --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --layers=-1,-2,-3,-4 \
    --max_seq_length=128 --batch_size=8
"""
from modeling.runtime import cpu_kernels, quiet

cpu_kernels.choose()  # before TensorFlow loads: the CPU kernels measured fastest
quiet.install()  # before TensorFlow loads: its start-up noise off stderr

from absl import flags

import shared_flags
from modeling.runtime import cli
from modeling.tasks import extract_features

FLAGS = flags.FLAGS
flags.DEFINE_string("input_file", None, "Text file, one example per line.")
flags.DEFINE_string("output_file", None, "JSON-lines file to write.")
flags.DEFINE_string("layers", "-1,-2,-3,-4", "Comma-separated encoder layer indexes.")
flags.DEFINE_string("bert_config_file", None, "bert_config.json of the pre-trained model.")
flags.DEFINE_integer("max_seq_length", 128, "Sequence length after WordPiece tokenization; "
                     "longer sequences are truncated, shorter ones padded.")
flags.DEFINE_string("init_checkpoint", None, "Original (TF1 name-based) BERT checkpoint.")
shared_flags.define_allow_fewer_layers_flag()
flags.adopt_module_key_flags(shared_flags)
flags.DEFINE_string("vocab_file", None, "vocab.txt the model was trained with.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (True for uncased models).")
flags.DEFINE_integer("batch_size", 32, "Batch size for predictions.")
flags.DEFINE_float("progress_seconds", 30.0, "Log progress (examples, examples/s, elapsed, ETA) "
                   "this often when the work takes longer.")
for _name in ("input_file", "output_file", "bert_config_file", "init_checkpoint", "vocab_file"):
    flags.mark_flag_as_required(_name)


def main(_):
    extract_features.run(
        FLAGS.input_file, FLAGS.output_file, FLAGS.bert_config_file, FLAGS.init_checkpoint,
        FLAGS.vocab_file, FLAGS.layers, FLAGS.do_lower_case, FLAGS.max_seq_length,
        FLAGS.batch_size, FLAGS.progress_seconds, FLAGS.allow_fewer_layers)


if __name__ == "__main__":
    cli.run(main)
