"""Fine-tunes BERT on a GLUE task or XNLI, evaluates, predicts and exports, as the original.

  python run_classifier.py --task_name=MRPC --do_train=true --do_eval=true \
    --data_dir=$GLUE_DIR/MRPC --vocab_file=$BERT_BASE_DIR/vocab.txt \
    --bert_config_file=$BERT_BASE_DIR/bert_config.json \
    --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --max_seq_length=128 \
    --train_batch_size=32 --learning_rate=2e-5 --num_train_epochs=3.0 \
    --output_dir=/tmp/mrpc_output/ --export_dir=/tmp/mrpc_serving

Features are written to output_dir as train/eval/predict.tf_record; checkpoints every
--save_checkpoints_steps, and a run on a directory that holds them resumes from the latest.
--do_eval writes eval_results.txt, --do_predict test_results.tsv, and --export_dir a numbered
SavedModel for TF Serving with raw-text and token-id signatures.
"""
import os

import tensorflow as tf
from absl import flags, logging

import training_flags
from modeling import cli, export, files
from modeling.tasks import classifier
from modeling.data import classifier as classifier_data

FLAGS = flags.FLAGS
training_flags.define_fine_tuning_flags()
flags.DEFINE_string("data_dir", None, "The task's data directory (.tsv files).")
flags.DEFINE_string("task_name", None, "The task: " + ", ".join(sorted(classifier_data.PROCESSORS))
                    + " (case-insensitive).")
for _name in ("data_dir", "task_name"):
    flags.mark_flag_as_required(_name)


def _check_flags(config, tokenizer):
    training_flags.check_task_flags(
        config, tokenizer, ("do_train", "do_eval", "do_predict", "export_dir"),
        ("train_batch_size", "eval_batch_size", "predict_batch_size", "save_checkpoints_steps",
         "iterations_per_loop"))


def _features(examples, name, strategy, batch_size, processor, tokenizer, record_dir):
    """Writes the examples' records to record_dir/<name>.tf_record, padded with fake examples
    to whole batches on TPUs (which need fixed shapes), as the original; returns the path."""
    if isinstance(strategy, tf.distribute.TPUStrategy):
        examples = examples + [classifier_data.PaddingInputExample()] * (-len(examples)
                                                                          % batch_size)
    path = os.path.join(record_dir, f"{name}.tf_record")
    classifier_data.write_features(examples, processor.get_labels(), FLAGS.max_seq_length,
                                   tokenizer, path)
    return path


def _dataset(path, batch_size, processor, strategy):
    return classifier.classifier_dataset(
        path, batch_size, FLAGS.max_seq_length, processor.is_regression, is_training=False,
        drop_remainder=isinstance(strategy, tf.distribute.TPUStrategy))


def _splits(processor):
    """(suffix, processor) of each evaluated set: MNLI's matched and mismatched halves."""
    if isinstance(processor, classifier_data.MnliProcessor) and not isinstance(
            processor, classifier_data.MnliMismatchedProcessor):
        return [("", processor), ("_mismatched", classifier_data.MnliMismatchedProcessor())]
    return [("", processor)]


def main(_):
    processor = classifier_data.get_processor(FLAGS.task_name)
    config, tokenizer, strategy, chief, record_dir = training_flags.start(_check_flags)

    num_train_steps = num_warmup_steps = 0
    if FLAGS.do_train:
        training_flags.check_train_batch(strategy)
        train_examples = processor.get_train_examples(FLAGS.data_dir)
        num_train_steps = int(len(train_examples) / FLAGS.train_batch_size
                              * FLAGS.num_train_epochs)
        num_warmup_steps = int(num_train_steps * FLAGS.warmup_proportion)
        training_flags.check_train_steps(num_train_steps, len(train_examples))
    trainer = classifier.ClassifierTrainer(
        strategy, config, max(len(processor.get_labels()), 1), processor.is_regression,
        FLAGS.learning_rate, max(num_train_steps, 1), num_warmup_steps,
        **training_flags.trainer_options())
    head_missing = list(trainer.OPTIONAL_VARIABLES)
    if FLAGS.init_checkpoint:
        head_missing = trainer.init_from(FLAGS.init_checkpoint)

    if FLAGS.do_train:
        path = _features(train_examples, "train", strategy, FLAGS.train_batch_size, processor,
                         tokenizer, record_dir)
        logging.info("Training on %d examples, batch %d, %d steps", len(train_examples),
                     FLAGS.train_batch_size, num_train_steps)

        def dataset_fn(skip_batches):
            return classifier.classifier_dataset(
                path, FLAGS.train_batch_size, FLAGS.max_seq_length, processor.is_regression,
                is_training=True, seed=FLAGS.seed, skip_batches=skip_batches)
        training_flags.train_and_keep_original(trainer, dataset_fn, num_train_steps, chief)
        head_missing = []
    elif trainer.restore_latest(FLAGS.output_dir):
        head_missing = []

    if FLAGS.do_eval:
        results = {}
        for suffix, split_processor in _splits(processor):
            examples = split_processor.get_dev_examples(FLAGS.data_dir)
            path = _features(examples, f"eval{suffix}", strategy, FLAGS.eval_batch_size,
                             processor, tokenizer, record_dir)
            split_results = classifier.evaluate(
                trainer, _dataset(path, FLAGS.eval_batch_size, processor, strategy),
                FLAGS.eval_batch_size, FLAGS.task_name)
            logging.info("Eval results%s (%d examples): %s", suffix, len(examples),
                         split_results)
            results.update({key if key == "global_step" else key + suffix: value
                            for key, value in split_results.items()})
        if chief:
            files.write_eval_results(results, os.path.join(FLAGS.output_dir,
                                                              "eval_results.txt"))

    if FLAGS.do_predict:
        for suffix, split_processor in _splits(processor):
            examples = split_processor.get_test_examples(FLAGS.data_dir)
            path = _features(examples, f"predict{suffix}", strategy, FLAGS.predict_batch_size,
                             processor, tokenizer, record_dir)
            values = classifier.predict(
                trainer, _dataset(path, FLAGS.predict_batch_size, processor, strategy))
            if len(values) != len(examples):
                raise RuntimeError(f"{len(values)} predictions for {len(examples)} examples")
            if chief:
                classifier.write_test_results(
                    values, os.path.join(FLAGS.output_dir, f"test_results{suffix}.tsv"))

    if FLAGS.export_dir:
        module = export.ClassifierExport(trainer.model, FLAGS.vocab_file, FLAGS.do_lower_case,
                                         FLAGS.max_seq_length, processor.get_labels(),
                                         processor.is_pair)
        training_flags.save_export(module, head_missing, chief)


if __name__ == "__main__":
    cli.run(main)
