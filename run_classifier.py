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
import tempfile

import tensorflow as tf
from absl import flags, logging

import training_flags
from modeling import (BertConfig, classification, classifier_data, cli, distribution, export,
                      tokenization, training)

FLAGS = flags.FLAGS
flags.DEFINE_string("data_dir", None, "The task's data directory (.tsv files).")
flags.DEFINE_string("bert_config_file", None, "The config json file of the pre-trained model.")
flags.DEFINE_string("task_name", None, "The task: " + ", ".join(sorted(classifier_data.PROCESSORS))
                    + " (case-insensitive).")
flags.DEFINE_string("vocab_file", None, "The vocabulary file of the model.")
flags.DEFINE_string("output_dir", None, "Where features, checkpoints and results are written.")
flags.DEFINE_string("init_checkpoint", None, "Initial checkpoint: an original one (Google's "
                    "bert_model.ckpt, or a fine-tuned one with output_weights) or one of ours.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (uncased models).")
flags.DEFINE_integer("max_seq_length", 128, "Tokens per example after WordPiece, [CLS] and "
                     "[SEP]; longer examples are truncated, shorter ones padded.")
flags.DEFINE_bool("do_train", False, "Whether to fine-tune on train.tsv.")
flags.DEFINE_bool("do_eval", False, "Whether to evaluate on the dev set.")
flags.DEFINE_bool("do_predict", False, "Whether to predict the test set.")
flags.DEFINE_integer("train_batch_size", 32, "Global batch size for training.")
flags.DEFINE_integer("eval_batch_size", 8, "Global batch size for eval.")
flags.DEFINE_integer("predict_batch_size", 8, "Global batch size for predict.")
flags.DEFINE_float("learning_rate", 5e-5, "The initial learning rate for Adam.")
flags.DEFINE_float("num_train_epochs", 3.0, "Total number of training epochs.")
flags.DEFINE_float("warmup_proportion", 0.1, "Fraction of training for linear warm-up.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save a checkpoint.")
flags.DEFINE_integer("iterations_per_loop", 1000, "Steps in each compiled loop call.")
flags.DEFINE_string("export_dir", None, "Write a SavedModel for TF Serving to "
                    "export_dir/<version>/ (after training, or from the checkpoint alone).")
for _name in ("data_dir", "task_name", "vocab_file", "bert_config_file", "output_dir"):
    flags.mark_flag_as_required(_name)


def _check_flags(config, tokenizer):
    if not (FLAGS.do_train or FLAGS.do_eval or FLAGS.do_predict or FLAGS.export_dir):
        raise ValueError("At least one of --do_train, --do_eval, --do_predict or --export_dir "
                         "must be set.")
    for name in ("train_batch_size", "eval_batch_size", "predict_batch_size",
                 "save_checkpoints_steps", "iterations_per_loop"):
        if getattr(FLAGS, name) <= 0:
            raise ValueError(f"--{name} must be positive, got {getattr(FLAGS, name)}")
    if not 3 <= FLAGS.max_seq_length <= config.max_position_embeddings:
        raise ValueError(f"--max_seq_length={FLAGS.max_seq_length} must be between 3 and "
                         f"max_position_embeddings {config.max_position_embeddings} of "
                         f"{FLAGS.bert_config_file}")
    if len(tokenizer.vocab) != config.vocab_size:
        raise ValueError(f"{FLAGS.vocab_file} has {len(tokenizer.vocab)} tokens but "
                         f"{FLAGS.bert_config_file} says vocab_size={config.vocab_size}")
    if FLAGS.init_checkpoint:
        tokenization.validate_case_matches_checkpoint(FLAGS.do_lower_case,
                                                      FLAGS.init_checkpoint)


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
    return classification.classifier_dataset(
        path, batch_size, FLAGS.max_seq_length, processor.is_regression, is_training=False,
        drop_remainder=isinstance(strategy, tf.distribute.TPUStrategy))


def _splits(processor):
    """(suffix, processor) of each evaluated set: MNLI's matched and mismatched halves."""
    if isinstance(processor, classifier_data.MnliProcessor) and not isinstance(
            processor, classifier_data.MnliMismatchedProcessor):
        return [("", processor), ("_mismatched", classifier_data.MnliMismatchedProcessor())]
    return [("", processor)]


def main(_):
    config = BertConfig.from_json_file(FLAGS.bert_config_file)
    tokenizer = tokenization.FullTokenizer(FLAGS.vocab_file, FLAGS.do_lower_case)
    _check_flags(config, tokenizer)
    processor = classifier_data.get_processor(FLAGS.task_name)
    strategy = training_flags.strategy()  # first of all TensorFlow work
    chief = distribution.is_chief(strategy)
    # Every worker writes and reads its own copy of the records; the chief's are kept.
    record_dir = FLAGS.output_dir if chief else tempfile.mkdtemp(prefix="classifier_records_")
    tf.io.gfile.makedirs(FLAGS.output_dir)

    num_train_steps = num_warmup_steps = 0
    if FLAGS.do_train:
        training_flags.check_train_batch(strategy)
        train_examples = processor.get_train_examples(FLAGS.data_dir)
        num_train_steps = int(len(train_examples) / FLAGS.train_batch_size
                              * FLAGS.num_train_epochs)
        num_warmup_steps = int(num_train_steps * FLAGS.warmup_proportion)
        if num_train_steps < 1:
            raise ValueError(f"{len(train_examples)} training examples x --num_train_epochs="
                             f"{FLAGS.num_train_epochs} make no whole batch of "
                             f"--train_batch_size={FLAGS.train_batch_size}")
    trainer = classification.ClassifierTrainer(
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
            return classification.classifier_dataset(
                path, FLAGS.train_batch_size, FLAGS.max_seq_length, processor.is_regression,
                is_training=True, seed=FLAGS.seed, skip_batches=skip_batches)
        trainer.train(dataset_fn, FLAGS.output_dir, num_train_steps, FLAGS.iterations_per_loop,
                      FLAGS.save_checkpoints_steps, FLAGS.keep_checkpoint_max)
        original = os.path.join(FLAGS.output_dir if chief else tempfile.mkdtemp(), "export",
                                "bert_model.ckpt")
        trainer.export_original(original)
        logging.info("Original-format checkpoint: %s", original)
        head_missing = []
    elif trainer.restore_latest(FLAGS.output_dir):
        head_missing = []

    if FLAGS.do_eval:
        results = {}
        for suffix, split_processor in _splits(processor):
            examples = split_processor.get_dev_examples(FLAGS.data_dir)
            path = _features(examples, f"eval{suffix}", strategy, FLAGS.eval_batch_size,
                             processor, tokenizer, record_dir)
            split_results = classification.evaluate(
                trainer, _dataset(path, FLAGS.eval_batch_size, processor, strategy),
                FLAGS.eval_batch_size, FLAGS.task_name)
            logging.info("Eval results%s (%d examples): %s", suffix, len(examples),
                         split_results)
            results.update({key if key == "global_step" else key + suffix: value
                            for key, value in split_results.items()})
        if chief:
            training.write_eval_results(results, os.path.join(FLAGS.output_dir,
                                                              "eval_results.txt"))

    if FLAGS.do_predict:
        for suffix, split_processor in _splits(processor):
            examples = split_processor.get_test_examples(FLAGS.data_dir)
            path = _features(examples, f"predict{suffix}", strategy, FLAGS.predict_batch_size,
                             processor, tokenizer, record_dir)
            values = classification.predict(
                trainer, _dataset(path, FLAGS.predict_batch_size, processor, strategy))
            if len(values) != len(examples):
                raise RuntimeError(f"{len(values)} predictions for {len(examples)} examples")
            if chief:
                classification.write_test_results(
                    values, os.path.join(FLAGS.output_dir, f"test_results{suffix}.tsv"))

    if FLAGS.export_dir:
        if head_missing:
            raise ValueError(f"Nothing to export: --init_checkpoint={FLAGS.init_checkpoint} "
                             f"has no classifier head ({', '.join(head_missing)}) and "
                             f"--output_dir holds no fine-tuned checkpoint; fine-tune with "
                             f"--do_train first")
        module = export.ClassifierExport(trainer.model, FLAGS.vocab_file, FLAGS.do_lower_case,
                                         FLAGS.max_seq_length, processor.get_labels(),
                                         processor.is_pair)
        directory = export.save_versioned(
            module, FLAGS.export_dir if chief else tempfile.mkdtemp(prefix="export_"))
        logging.info("SavedModel for TF Serving: %s", directory)


if __name__ == "__main__":
    cli.run(main)
