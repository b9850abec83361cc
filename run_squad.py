"""Fine-tunes BERT on SQuAD v1.1 or v2.0, predicts, scores and exports, as the original.

  python run_squad.py --vocab_file=$BERT_BASE_DIR/vocab.txt \
    --bert_config_file=$BERT_BASE_DIR/bert_config.json \
    --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --do_train=True \
    --train_file=$SQUAD_DIR/train-v1.1.json --do_predict=True \
    --predict_file=$SQUAD_DIR/dev-v1.1.json --train_batch_size=12 --learning_rate=3e-5 \
    --num_train_epochs=2.0 --max_seq_length=384 --doc_stride=128 --output_dir=/tmp/squad_base/

--do_predict writes predictions.json, nbest_predictions.json (and null_odds.json for v2.0)
and, when the predict file has answers, eval_results.json with the official metric.
--export_dir writes a numbered SavedModel with token-id and raw-text signatures.
"""
import json
import os
import random
import tempfile

import tensorflow as tf
from absl import flags, logging

import training_flags
from modeling import cli, export
from modeling.data import squad as squad_data
from modeling.evaluation import squad as squad_evaluation
from modeling.evaluation import squad_answers
from modeling.tasks import squad

FLAGS = flags.FLAGS
training_flags.define_fine_tuning_flags(max_seq_length=384, with_eval=False)
flags.DEFINE_string("train_file", None, "SQuAD json for training, e.g. train-v1.1.json.")
flags.DEFINE_string("predict_file", None, "SQuAD json for predictions, e.g. dev-v1.1.json.")
flags.DEFINE_integer("doc_stride", 128, "How far apart consecutive document windows start.")
flags.DEFINE_integer("max_query_length", 64, "Questions are truncated to this many tokens.")
flags.DEFINE_integer("n_best_size", 20, "Candidates kept in nbest_predictions.json.")
flags.DEFINE_integer("max_answer_length", 30, "Longest answer, in WordPiece tokens.")
flags.DEFINE_bool("verbose_logging", False, "Log the alignment failures of post-processing.")
flags.DEFINE_bool("version_2_with_negative", False, "SQuAD 2.0: questions may have no answer.")
flags.DEFINE_float("null_score_diff_threshold", 0.0, "Predict no answer when the null score "
                   "beats the best span by more than this.")

TRAIN_SHUFFLE_SEED = 12345  # the original shuffles the training examples with this seed


def _check_flags(config, tokenizer):
    training_flags.check_task_flags(
        config, tokenizer, ("do_train", "do_predict", "export_dir"),
        ("train_batch_size", "predict_batch_size", "save_checkpoints_steps",
         "iterations_per_loop", "doc_stride", "max_query_length", "n_best_size",
         "max_answer_length"))
    if FLAGS.do_train and not FLAGS.train_file:
        raise ValueError("--do_train needs --train_file")
    if FLAGS.do_predict and not FLAGS.predict_file:
        raise ValueError("--do_predict needs --predict_file")
    if FLAGS.max_seq_length <= FLAGS.max_query_length + 3:
        raise ValueError(f"--max_seq_length={FLAGS.max_seq_length} leaves no room for the "
                         f"document after a question of --max_query_length="
                         f"{FLAGS.max_query_length} tokens, [CLS] and two [SEP]")


def _write_features(examples, tokenizer, path, is_training):
    """Writes the examples' features to `path`; returns them (kept for post-processing)."""
    writer = squad_data.FeatureWriter(path, is_training)
    features = []

    def keep(feature):
        features.append(feature)
        writer.process_feature(feature)
    squad_data.convert_examples_to_features(
        examples, tokenizer, FLAGS.max_seq_length, FLAGS.doc_stride, FLAGS.max_query_length,
        is_training, keep)
    writer.close()
    return features


def main(_):
    config, tokenizer, strategy, chief, record_dir = training_flags.start(_check_flags)

    num_train_steps = num_warmup_steps = 0
    if FLAGS.do_train:
        training_flags.check_train_batch(strategy)
        train_examples = squad_data.read_squad_examples(
            FLAGS.train_file, is_training=True,
            version_2_with_negative=FLAGS.version_2_with_negative)
        random.Random(TRAIN_SHUFFLE_SEED).shuffle(train_examples)
        num_train_steps = int(len(train_examples) / FLAGS.train_batch_size
                              * FLAGS.num_train_epochs)
        num_warmup_steps = int(num_train_steps * FLAGS.warmup_proportion)
        training_flags.check_train_steps(num_train_steps, len(train_examples))
    trainer = squad.SquadTrainer(
        strategy, config, FLAGS.learning_rate, max(num_train_steps, 1), num_warmup_steps,
        **training_flags.trainer_options())
    head_missing = list(trainer.OPTIONAL_VARIABLES)
    if FLAGS.init_checkpoint:
        head_missing = trainer.init_from(FLAGS.init_checkpoint)

    if FLAGS.do_train:
        path = os.path.join(record_dir, "train.tf_record")
        features = _write_features(train_examples, tokenizer, path, is_training=True)
        logging.info("Training on %d examples (%d features), batch %d, %d steps",
                     len(train_examples), len(features), FLAGS.train_batch_size,
                     num_train_steps)
        del features

        def dataset_fn(skip_batches):
            return squad.squad_dataset(path, FLAGS.train_batch_size,
                                                FLAGS.max_seq_length, is_training=True,
                                                seed=FLAGS.seed, skip_batches=skip_batches)
        training_flags.train_and_keep_original(trainer, dataset_fn, num_train_steps, chief)
        head_missing = []
    elif trainer.restore_latest(FLAGS.output_dir):
        head_missing = []

    if FLAGS.do_predict:
        _predict(trainer, tokenizer, record_dir, chief)

    if FLAGS.export_dir:
        module = export.SquadExport(
            trainer.model, FLAGS.vocab_file, FLAGS.do_lower_case, FLAGS.max_seq_length,
            FLAGS.max_query_length, FLAGS.max_answer_length, FLAGS.version_2_with_negative,
            FLAGS.null_score_diff_threshold)
        training_flags.save_export(module, head_missing, chief)


def _predict(trainer, tokenizer, record_dir, chief):
    examples = squad_data.read_squad_examples(
        FLAGS.predict_file, is_training=False,
        version_2_with_negative=FLAGS.version_2_with_negative)
    path = os.path.join(record_dir, "eval.tf_record")
    features = _write_features(examples, tokenizer, path, is_training=False)
    logging.info("Predicting %d examples (%d features), batch %d", len(examples),
                 len(features), FLAGS.predict_batch_size)
    unique_ids, starts, ends = squad.predict_logits(
        trainer, squad.squad_dataset(path, FLAGS.predict_batch_size,
                                              FLAGS.max_seq_length, is_training=False))
    results = [squad_answers.RawResult(int(unique_id), start.tolist(), end.tolist())
               for unique_id, start, end in zip(unique_ids, starts, ends)]
    directory = FLAGS.output_dir if chief else tempfile.mkdtemp(prefix="squad_predictions_")
    null_odds_file = os.path.join(directory, "null_odds.json")
    squad_answers.write_predictions(
        examples, features, results, FLAGS.n_best_size, FLAGS.max_answer_length,
        FLAGS.do_lower_case, os.path.join(directory, "predictions.json"),
        os.path.join(directory, "nbest_predictions.json"), null_odds_file,
        FLAGS.version_2_with_negative, FLAGS.null_score_diff_threshold, FLAGS.verbose_logging)
    with tf.io.gfile.GFile(FLAGS.predict_file) as reader:
        dataset = json.load(reader)
    answered = any(qa.get("answers") for article in dataset["data"]
                   for paragraph in article["paragraphs"] for qa in paragraph["qas"])
    if answered and chief:
        # As the official script run on these files: its version picks v1.1 or v2.0.
        results = squad_evaluation.evaluate_file(
            FLAGS.predict_file, os.path.join(directory, "predictions.json"),
            null_odds_file if FLAGS.version_2_with_negative else None)
        logging.info("Official SQuAD metric: %s", results)
        temp = os.path.join(directory, f"eval_results.json.tmp-{os.getpid()}")
        with tf.io.gfile.GFile(temp, "w") as writer:
            writer.write(json.dumps(results, indent=2) + "\n")
        tf.io.gfile.rename(temp, os.path.join(directory, "eval_results.json"), overwrite=True)


if __name__ == "__main__":
    cli.run(main)
