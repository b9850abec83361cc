"""Fine-tunes BERT on SWAG-style multiple choice, as the paper (section 4.4): each
(context, ending) pair is one "[CLS] context [SEP] ending [SEP]" sequence, a vector scores
each pooled output, and a softmax runs over the four choices.

  python run_multiple_choice.py --data_dir=$SWAG_DIR --vocab_file=$BERT_BASE_DIR/vocab.txt \
    --bert_config_file=$BERT_BASE_DIR/bert_config.json \
    --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --do_train=True --do_eval=True \
    --learning_rate=2e-5 --num_train_epochs=3.0 --output_dir=/tmp/swag

data_dir holds train.csv, val.csv and test.csv (SWAG's columns sent1, sent2, ending0..3,
label). --do_eval writes eval_results.txt (accuracy), --do_predict test_results.tsv: per test
example its id and the four probabilities.
"""
import os

import tensorflow as tf
from absl import flags, logging

import training_flags
from modeling import cli, export, files
from modeling.data import multiple_choice as multiple_choice_data
from modeling.tasks import multiple_choice

FLAGS = flags.FLAGS
# The paper's SWAG settings: batch 16, learning rate 2e-5.
training_flags.define_fine_tuning_flags(train_batch_size=16, learning_rate=2e-5)
flags.DEFINE_string("data_dir", None, "Directory of train.csv, val.csv, test.csv.")
flags.mark_flag_as_required("data_dir")


def _check_flags(config, tokenizer):
    training_flags.check_task_flags(
        config, tokenizer, ("do_train", "do_eval", "do_predict", "export_dir"),
        ("train_batch_size", "eval_batch_size", "predict_batch_size", "save_checkpoints_steps",
         "iterations_per_loop"))


def _records(examples, name, strategy, batch_size, tokenizer, record_dir):
    """Writes record_dir/<name>.tf_record, padded to whole batches on TPUs, as the classifier."""
    if isinstance(strategy, tf.distribute.TPUStrategy):
        examples = examples + [multiple_choice_data.PaddingInputExample()] * (
            -len(examples) % batch_size)
    path = os.path.join(record_dir, f"{name}.tf_record")
    multiple_choice_data.write_features(examples, FLAGS.max_seq_length, tokenizer, path)
    return path


def _read(split, has_labels):
    path = os.path.join(FLAGS.data_dir, f"{split}.csv")
    if not tf.io.gfile.exists(path):
        raise ValueError(f"{path} does not exist: --data_dir must hold SWAG's {split}.csv")
    return multiple_choice_data.read_swag(path, has_labels)


def main(_):
    config, tokenizer, strategy, chief, record_dir = training_flags.start(_check_flags)
    tpu = isinstance(strategy, tf.distribute.TPUStrategy)

    num_train_steps = 0
    if FLAGS.do_train:
        training_flags.check_train_batch(strategy)
        train_examples = _read("train", has_labels=True)
        num_train_steps = int(len(train_examples) / FLAGS.train_batch_size
                              * FLAGS.num_train_epochs)
        training_flags.check_train_steps(num_train_steps, len(train_examples))
    trainer = multiple_choice.MultipleChoiceTrainer(
        strategy, config, FLAGS.learning_rate, max(num_train_steps, 1),
        int(num_train_steps * FLAGS.warmup_proportion), **training_flags.trainer_options())
    head_missing = list(trainer.OPTIONAL_VARIABLES)
    if FLAGS.init_checkpoint:
        head_missing = trainer.init_from(FLAGS.init_checkpoint)

    if FLAGS.do_train:
        path = _records(train_examples, "train", strategy, FLAGS.train_batch_size, tokenizer,
                        record_dir)
        logging.info("Training on %d examples, batch %d, %d steps", len(train_examples),
                     FLAGS.train_batch_size, num_train_steps)

        def dataset_fn(skip_batches):
            return multiple_choice.swag_dataset(
                path, FLAGS.train_batch_size, FLAGS.max_seq_length, is_training=True,
                seed=FLAGS.seed, skip_batches=skip_batches)
        training_flags.train_and_keep_original(trainer, dataset_fn, num_train_steps, chief)
        head_missing = []
    elif trainer.restore_latest(FLAGS.output_dir):
        head_missing = []

    if FLAGS.do_eval:
        path = _records(_read("val", has_labels=True), "eval", strategy, FLAGS.eval_batch_size,
                        tokenizer, record_dir)
        dataset = multiple_choice.swag_dataset(
            path, FLAGS.eval_batch_size, FLAGS.max_seq_length, False, drop_remainder=tpu)
        results, _ = multiple_choice.evaluate(trainer, dataset)
        logging.info("Eval results: %s", results)
        if chief:
            files.write_eval_results(results, os.path.join(FLAGS.output_dir,
                                                              "eval_results.txt"))

    if FLAGS.do_predict:
        examples = _read("test", has_labels=False)
        path = _records(examples, "predict", strategy, FLAGS.predict_batch_size, tokenizer,
                        record_dir)
        _, probabilities = multiple_choice.evaluate(
            trainer, multiple_choice.swag_dataset(
                path, FLAGS.predict_batch_size, FLAGS.max_seq_length, False,
                drop_remainder=tpu))
        if chief:
            multiple_choice_data.write_predictions(
                examples, probabilities, os.path.join(FLAGS.output_dir, "test_results.tsv"))

    if FLAGS.export_dir:
        module = export.MultipleChoiceExport(trainer.model, FLAGS.vocab_file,
                                             FLAGS.do_lower_case, FLAGS.max_seq_length)
        training_flags.save_export(module, head_missing, chief)


if __name__ == "__main__":
    cli.run(main)
