"""Writes BERT activations for each input line as JSON lines, as the original script does.

Input lines are `text` or `text_a ||| text_b`. Example:

  python extract_features.py --input_file=input.txt --output_file=output.jsonl \
    --vocab_file=$BERT_BASE_DIR/vocab.txt --bert_config_file=$BERT_BASE_DIR/bert_config.json \
    --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --layers=-1,-2,-3,-4 \
    --max_seq_length=128 --batch_size=8
"""
import os
import time

from absl import flags, logging
import tensorflow as tf

from modeling import BertConfig, BertModel, cli
from modeling.data import text
from modeling.tasks import extract_features
from modeling.checkpoints import name_based
from modeling.text import tokenization

FLAGS = flags.FLAGS
flags.DEFINE_string("input_file", None, "Text file, one example per line.")
flags.DEFINE_string("output_file", None, "JSON-lines file to write.")
flags.DEFINE_string("layers", "-1,-2,-3,-4", "Comma-separated encoder layer indexes.")
flags.DEFINE_string("bert_config_file", None, "bert_config.json of the pre-trained model.")
flags.DEFINE_integer("max_seq_length", 128, "Sequence length after WordPiece tokenization; "
                     "longer sequences are truncated, shorter ones padded.")
flags.DEFINE_string("init_checkpoint", None, "Original (TF1 name-based) BERT checkpoint.")
flags.DEFINE_string("vocab_file", None, "vocab.txt the model was trained with.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (True for uncased models).")
flags.DEFINE_integer("batch_size", 32, "Batch size for predictions.")
for _name in ("input_file", "output_file", "bert_config_file", "init_checkpoint", "vocab_file"):
    flags.mark_flag_as_required(_name)


def main(_):
    layer_indexes = [int(x) for x in FLAGS.layers.split(",")]
    config = BertConfig.from_json_file(FLAGS.bert_config_file)
    if FLAGS.max_seq_length > config.max_position_embeddings:
        raise ValueError(f"--max_seq_length={FLAGS.max_seq_length} exceeds "
                             f"max_position_embeddings {config.max_position_embeddings} of "
                             f"{FLAGS.bert_config_file}")
    tokenizer = tokenization.FullTokenizer(FLAGS.vocab_file, FLAGS.do_lower_case)
    if len(tokenizer.vocab) != config.vocab_size:
        raise ValueError(f"{FLAGS.vocab_file} has {len(tokenizer.vocab)} tokens but "
                             f"{FLAGS.bert_config_file} says vocab_size={config.vocab_size}")
    model = BertModel(config)
    # The pooler is not among the features; Hugging Face's masked-LM models have none.
    name_based.load_original(model, FLAGS.init_checkpoint, optional=name_based.POOLER)

    examples = text.read_examples(FLAGS.input_file)
    features = text.convert_examples_to_features(
        examples, FLAGS.max_seq_length, tokenizer)
    temp_path = f"{FLAGS.output_file}.tmp-{os.getpid()}"
    start = time.time()
    with tf.io.gfile.GFile(temp_path, "w") as writer:
        for done, (feature, layers) in enumerate(extract_features.layer_outputs(
                model, features, layer_indexes, FLAGS.batch_size), start=1):
            writer.write(extract_features.to_json_line(feature, layers))
            if done % 1000 == 0 or done == len(features):
                logging.info("%d/%d examples, %.1f/s", done, len(features),
                             done / (time.time() - start))
    tf.io.gfile.rename(temp_path, FLAGS.output_file, overwrite=True)


if __name__ == "__main__":
    cli.run(main)
