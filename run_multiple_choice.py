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
import tempfile

import tensorflow as tf
from absl import flags, logging

import training_flags
from modeling import (BertConfig, cli, distribution, export, multiple_choice_data,
                      multiple_choice_training, tokenization, training)

FLAGS = flags.FLAGS
flags.DEFINE_string("data_dir", None, "Directory of train.csv, val.csv, test.csv.")
flags.DEFINE_string("bert_config_file", None, "The config json file of the pre-trained model.")
flags.DEFINE_string("vocab_file", None, "The vocabulary file of the model.")
flags.DEFINE_string("output_dir", None, "Where features, checkpoints and results are written.")
flags.DEFINE_string("init_checkpoint", None, "Initial checkpoint (Google's or ours).")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (uncased models).")
flags.DEFINE_integer("max_seq_length", 128, "Tokens per (context, ending) sequence.")
flags.DEFINE_bool("do_train", False, "Whether to fine-tune on train.csv.")
flags.DEFINE_bool("do_eval", False, "Whether to evaluate on val.csv.")
flags.DEFINE_bool("do_predict", False, "Whether to predict test.csv.")
flags.DEFINE_integer("train_batch_size", 16, "Global batch size for training (examples).")
flags.DEFINE_integer("eval_batch_size", 8, "Global batch size for eval.")
flags.DEFINE_integer("predict_batch_size", 8, "Global batch size for predict.")
flags.DEFINE_float("learning_rate", 2e-5, "The initial learning rate for Adam (the paper's).")
flags.DEFINE_float("num_train_epochs", 3.0, "Total number of training epochs.")
flags.DEFINE_float("warmup_proportion", 0.1, "Fraction of training for linear warm-up.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save a checkpoint.")
flags.DEFINE_integer("iterations_per_loop", 1000, "Steps in each compiled loop call.")
flags.DEFINE_string("export_dir", None, "Write a SavedModel to export_dir/<version>/.")
for _name in ("data_dir", "bert_config_file", "vocab_file", "output_dir"):
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
    config = BertConfig.from_json_file(FLAGS.bert_config_file)
    tokenizer = tokenization.FullTokenizer(FLAGS.vocab_file, FLAGS.do_lower_case)
    _check_flags(config, tokenizer)
    strategy = training_flags.strategy()  # first of all TensorFlow work
    chief = distribution.is_chief(strategy)
    record_dir = FLAGS.output_dir if chief else tempfile.mkdtemp(prefix="swag_records_")
    tf.io.gfile.makedirs(FLAGS.output_dir)
    tpu = isinstance(strategy, tf.distribute.TPUStrategy)

    num_train_steps = 0
    if FLAGS.do_train:
        training_flags.check_train_batch(strategy)
        train_examples = _read("train", has_labels=True)
        num_train_steps = int(len(train_examples) / FLAGS.train_batch_size
                              * FLAGS.num_train_epochs)
        if num_train_steps < 1:
            raise ValueError(f"{len(train_examples)} training examples x --num_train_epochs="
                             f"{FLAGS.num_train_epochs} make no whole batch of "
                             f"--train_batch_size={FLAGS.train_batch_size}")
    trainer = multiple_choice_training.MultipleChoiceTrainer(
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
            return multiple_choice_training.swag_dataset(
                path, FLAGS.train_batch_size, FLAGS.max_seq_length, is_training=True,
                seed=FLAGS.seed, skip_batches=skip_batches)
        trainer.train(dataset_fn, FLAGS.output_dir, num_train_steps, FLAGS.iterations_per_loop,
                      FLAGS.save_checkpoints_steps, FLAGS.keep_checkpoint_max)
        trainer.export_original(os.path.join(FLAGS.output_dir if chief else tempfile.mkdtemp(),
                                             "export", "bert_model.ckpt"))
        head_missing = []
    elif trainer.restore_latest(FLAGS.output_dir):
        head_missing = []

    if FLAGS.do_eval:
        path = _records(_read("val", has_labels=True), "eval", strategy, FLAGS.eval_batch_size,
                        tokenizer, record_dir)
        dataset = multiple_choice_training.swag_dataset(
            path, FLAGS.eval_batch_size, FLAGS.max_seq_length, False, drop_remainder=tpu)
        results, _ = multiple_choice_training.evaluate(trainer, dataset)
        logging.info("Eval results: %s", results)
        if chief:
            training.write_eval_results(results, os.path.join(FLAGS.output_dir,
                                                              "eval_results.txt"))

    if FLAGS.do_predict:
        examples = _read("test", has_labels=False)
        path = _records(examples, "predict", strategy, FLAGS.predict_batch_size, tokenizer,
                        record_dir)
        _, probabilities = multiple_choice_training.evaluate(
            trainer, multiple_choice_training.swag_dataset(
                path, FLAGS.predict_batch_size, FLAGS.max_seq_length, False,
                drop_remainder=tpu))
        if chief:
            multiple_choice_data.write_predictions(
                examples, probabilities, os.path.join(FLAGS.output_dir, "test_results.tsv"))

    if FLAGS.export_dir:
        if head_missing:
            raise ValueError(f"Nothing to export: --init_checkpoint={FLAGS.init_checkpoint} "
                             f"has no choice head and --output_dir holds no fine-tuned "
                             f"checkpoint; fine-tune with --do_train first")
        module = export.MultipleChoiceExport(trainer.model, FLAGS.vocab_file,
                                             FLAGS.do_lower_case, FLAGS.max_seq_length)
        directory = export.save_versioned(
            module, FLAGS.export_dir if chief else tempfile.mkdtemp(prefix="export_"))
        logging.info("SavedModel: %s", directory)


if __name__ == "__main__":
    cli.run(main)
