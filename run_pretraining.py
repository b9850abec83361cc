"""Pre-trains BERT (masked LM + next sentence) on tf.distribute, as the original script.

  python run_pretraining.py --input_file=/tmp/tf_examples.tfrecord --output_dir=/tmp/pretraining \
    --do_train=True --do_eval=True --bert_config_file=$BERT_BASE_DIR/bert_config.json \
    --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --train_batch_size=32 \
    --max_seq_length=128 --max_predictions_per_seq=20 --num_train_steps=20 \
    --num_warmup_steps=10 --learning_rate=2e-5

Checkpoints go to --output_dir every --save_checkpoints_steps; a run started on a directory
that holds them resumes from the latest (weights, Adam slots, step and data position). The
trained model is also written as an original checkpoint, output_dir/export/bert_model.ckpt.
"""
import os
import tempfile

from absl import flags, logging
import tensorflow as tf

import training_flags
from modeling import BertConfig, cli, files
from modeling.training import distribution
from modeling.tasks import pretraining

FLAGS = flags.FLAGS
flags.DEFINE_string("bert_config_file", None, "The config json file of the pre-trained model.")
flags.DEFINE_string("input_file", None, "Input TF example files (comma-separated files/globs).")
flags.DEFINE_string("output_dir", None, "Where checkpoints, summaries and results are written.")
flags.DEFINE_string("init_checkpoint", None, "Initial checkpoint: an original TF1 one (e.g. "
                    "Google's bert_model.ckpt) or one written by this script.")
flags.DEFINE_integer("max_seq_length", 128, "Sequence length of the records.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked positions per record.")
flags.DEFINE_bool("do_train", False, "Whether to run training.")
flags.DEFINE_bool("do_eval", False, "Whether to run eval on the input files.")
flags.DEFINE_integer("train_batch_size", 32, "Global batch size for training.")
flags.DEFINE_integer("eval_batch_size", 8, "Global batch size for eval.")
flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for Adam.")
flags.DEFINE_integer("num_train_steps", 100000, "Number of training steps.")
flags.DEFINE_integer("num_warmup_steps", 10000, "Number of warmup steps.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save a checkpoint.")
flags.DEFINE_integer("iterations_per_loop", 1000, "Steps in each compiled loop call.")
flags.DEFINE_integer("max_eval_steps", 100, "Maximum number of eval batches.")
for _name in ("bert_config_file", "input_file", "output_dir"):
    flags.mark_flag_as_required(_name)


def main(_):
    if not FLAGS.do_train and not FLAGS.do_eval:
        raise ValueError("At least one of --do_train or --do_eval must be True.")
    for name in ("train_batch_size", "eval_batch_size", "num_train_steps",
                 "save_checkpoints_steps", "iterations_per_loop", "max_eval_steps"):
        if getattr(FLAGS, name) <= 0:
            raise ValueError(f"--{name} must be positive, got {getattr(FLAGS, name)}")
    config = BertConfig.from_json_file(FLAGS.bert_config_file)
    if FLAGS.max_seq_length > config.max_position_embeddings:
        raise ValueError(f"--max_seq_length={FLAGS.max_seq_length} exceeds "
                         f"max_position_embeddings {config.max_position_embeddings} of "
                         f"{FLAGS.bert_config_file}")
    strategy = training_flags.strategy()  # first of all TensorFlow work
    paths = pretraining.expand_files(FLAGS.input_file)
    pretraining.check_records(paths, FLAGS.max_seq_length, FLAGS.max_predictions_per_seq,
                                    config.vocab_size)
    training_flags.check_train_batch(strategy)
    tf.io.gfile.makedirs(FLAGS.output_dir)
    pretrainer = pretraining.Pretrainer(strategy, config, FLAGS.learning_rate,
                                        FLAGS.num_train_steps, FLAGS.num_warmup_steps,
                                        **training_flags.trainer_options())
    if FLAGS.init_checkpoint:
        pretrainer.init_from(FLAGS.init_checkpoint)
    chief = distribution.is_chief(strategy)

    if FLAGS.do_train:
        def dataset_fn(skip_batches):
            return pretraining.pretraining_dataset(
                paths, FLAGS.train_batch_size, FLAGS.max_seq_length,
                FLAGS.max_predictions_per_seq, is_training=True, seed=FLAGS.seed,
                skip_batches=skip_batches)
        pretrainer.train(dataset_fn, FLAGS.output_dir, FLAGS.num_train_steps,
                         FLAGS.iterations_per_loop, FLAGS.save_checkpoints_steps,
                         FLAGS.keep_checkpoint_max)
        export = os.path.join(FLAGS.output_dir if chief else tempfile.mkdtemp(), "export",
                              "bert_model.ckpt")
        pretrainer.export_original(export)
        if chief:
            tf.io.gfile.copy(FLAGS.bert_config_file, os.path.join(
                FLAGS.output_dir, "export", "bert_config.json"), overwrite=True)
            logging.info("Original-format checkpoint: %s", export)

    if FLAGS.do_eval:
        if not FLAGS.do_train:  # evaluate what the output directory holds
            pretrainer.restore_latest(FLAGS.output_dir)
        dataset = pretraining.pretraining_dataset(
            paths, FLAGS.eval_batch_size, FLAGS.max_seq_length, FLAGS.max_predictions_per_seq,
            is_training=False)
        results = pretrainer.evaluate(dataset, FLAGS.max_eval_steps)
        logging.info("Eval results: %s", results)
        if chief:
            files.write_eval_results(results, os.path.join(FLAGS.output_dir,
                                                              "eval_results.txt"))


if __name__ == "__main__":
    cli.run(main)
