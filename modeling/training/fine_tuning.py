"""The fine-tuning run every task script makes, as the original's scripts lay it out: check the
options and read every input up front, pick the strategy, hold output_dir (one training run at
a time: `output_lock`), build the task's trainer from a checkpoint, train (resuming from
output_dir) or restore the latest fine-tuned checkpoint, then evaluate, predict and export,
each as asked.

A task (modeling/tasks/) says what is particular to it by subclassing `Task`: its model and
loss, which the one `Trainer` trains, its inputs and its outputs; `run` does the rest.
"""
import dataclasses
import os
import random

import tensorflow as tf
from absl import logging

from modeling import export
from modeling.encoder.config import BertConfig
from modeling.runtime import files
from modeling.text import tokenization
from modeling.training import input_pipeline, runs
from modeling.training.objective import Objective
from modeling.training.options import (TrainingOptions, check_max_seq_length, check_vocabulary,
                                       refuse_untrained, require_positive)
from modeling.training.trainer import Trainer


def default_padding_multiple(use_xla):
    """What dynamic padding rounds batch lengths up to when --padding_multiple is not given.

    16 under XLA, where each length is a compilation of its own: at most T / 16 of them (8 at
    128) for at most 15 padded tokens a row. 8 on a GPU, whose tensor cores want multiples of 8.
    Otherwise 1, exact: the step is traced once for any length, and rounding up only computes
    more tokens (slower steps, benchmarks/history/finetuning.md).
    """
    if use_xla:
        return 16
    return 8 if tf.config.list_physical_devices("GPU") else 1


def shuffle_training_examples(examples, seed):
    """Shuffles `examples` in place by the run's `--seed`, before their records are written.

    The input pipeline shuffles with the original's 100-record buffer, which only mixes
    neighbours: a file stored in order (CoNLL-2003 by document, SWAG by video clip) would be
    trained on in that order, each batch from a few documents and the last, low-learning-rate
    steps all on the file's end. The original's run_squad shuffles its examples first for this
    reason, always with the seed 12345, which is `--seed`'s default: a run with the default seed
    trains in the original's order. Another seed draws another order, as `--seed` promises, so
    that restarts differ in their data order as well as in their head and dropout, as the
    paper's restarts did (section 4.1). run_classifier keeps GLUE's file order, as the original
    (those files are not grouped), and shuffles only long documents' windows.
    """
    random.Random(seed).shuffle(examples)


@dataclasses.dataclass(kw_only=True)
class FineTuningOptions(TrainingOptions):
    """The options the fine-tuning scripts share, by the original's flag names."""
    bert_config_file: str
    vocab_file: str
    do_lower_case: bool = True
    max_seq_length: int = 128
    do_predict: bool = False
    predict_batch_size: int = 8
    num_train_epochs: float = 3.0
    warmup_proportion: float = 0.1
    export_dir: str = None
    dynamic_padding: bool = True
    padding_multiple: int = None  # None: `default_padding_multiple`
    bucket_by_length: bool = False

    POSITIVE = TrainingOptions.POSITIVE + ("predict_batch_size",)
    INPUT_FILES = ("bert_config_file", "vocab_file")
    OUTPUT_DIRS = TrainingOptions.OUTPUT_DIRS + ("export_dir",)

    def check_values(self):
        super().check_values()
        if self.padding_multiple is not None:
            require_positive("padding_multiple", self.padding_multiple)
        if self.bucket_by_length and not self.dynamic_padding:
            raise ValueError("--bucket_by_length needs --dynamic_padding (buckets are batches "
                             "cut to their length)")
        if self.do_train and not self.num_train_epochs > 0:
            raise ValueError(f"--num_train_epochs must be positive, got {self.num_train_epochs}")
        if not 0 <= self.warmup_proportion <= 1:
            raise ValueError(f"--warmup_proportion must be between 0 and 1, got "
                             f"{self.warmup_proportion}")


class Task(Objective):
    """What a fine-tuning task adds to `run`. Subclasses set the class attributes and define
    the `Objective` the `Trainer` trains (`build_model`, `replica_loss`, and METRICS,
    `global_counts`, `loop_scalars` where the defaults do not fit), `read`,
    `write_train_records` and `train_dataset`, and those of `evaluate`, `predict` and
    `export_module` their actions need.

    ACTIONS: the actions the task's script offers (options that are true to act).
    CASE_MISMATCH_WARNS: a --do_lower_case that disagrees with the checkpoint's name is a
      warning, not an error (NER: the paper's model is cased).
    TRAIN_UNITS: what the training examples are called in messages.
    """
    ACTIONS = ("do_train", "do_eval", "do_predict", "export_dir")
    # Whether cutting a batch to its longest example leaves every result as it is: true when
    # no loss, metric or output reads the padded positions.
    PADDING_IS_INERT = True
    CASE_MISMATCH_WARNS = False
    TRAIN_UNITS = "training examples"
    LEAST_SEQ_LENGTH = 3  # [CLS], a token, [SEP]

    def check(self, options, config):
        """The task's own option checks, before anything is read; ValueError if one fails."""

    def read(self, options, tokenizer):
        """Reads and checks every input the options' actions will need, before any work.

        Returns:
          The number of training examples (0 unless training), which sets the step count.
        """
        raise NotImplementedError

    def write_train_records(self, context, path):
        """Writes the training records to `path`; logs what it wrote."""
        raise NotImplementedError

    def train_dataset(self, context, path, skip_batches):
        """The deterministic training dataset of `path`, after `skip_batches` batches."""
        raise NotImplementedError

    def evaluate(self, context):
        raise NotImplementedError

    def predict(self, context):
        raise NotImplementedError

    def export_module(self, context):
        """The `export.ServingModule` for --export_dir."""
        raise NotImplementedError


@dataclasses.dataclass
class Context:
    """What a task's steps work with. Every worker writes and reads its own copy of the
    records, in `record_dir` (`distribution.write_dir`: output_dir on the chief); only the
    chief keeps results, in `results_dir`."""
    options: FineTuningOptions
    config: BertConfig
    tokenizer: tokenization.FullTokenizer
    strategy: object
    chief: bool
    record_dir: str
    trainer: object = None
    padding_is_inert: bool = True

    @property
    def on_tpu(self):
        """TPUs need fixed shapes: evaluation sets are padded to whole batches."""
        return isinstance(self.strategy, tf.distribute.TPUStrategy)

    @property
    def padding(self):
        """How this run's batches are padded: an `input_pipeline` padding; fixed on TPUs."""
        options = self.options
        if self.on_tpu or not options.dynamic_padding or not self.padding_is_inert:
            return input_pipeline.FixedPadding()
        padding = (input_pipeline.LengthBuckets if options.bucket_by_length
                   else input_pipeline.DynamicPadding)
        return padding(options.max_seq_length,
                       options.padding_multiple or default_padding_multiple(options.use_xla))

    @property
    def results_dir(self):
        return self.options.output_dir if self.chief else self.record_dir

    def record_path(self, name):
        return os.path.join(self.record_dir, f"{name}.tf_record")

    def write_eval_results(self, results, name="eval_results.txt"):
        """The original's `key = value` file in output_dir (chief only)."""
        if self.chief:
            files.write_eval_results(results, os.path.join(self.options.output_dir, name))


def check(task, options, config, tokenizer):
    """Every check of the options against each other, the config and the vocabulary (after
    `options.check()`, which checks that these can be read)."""
    if not any(getattr(options, name) for name in task.ACTIONS):
        raise ValueError("At least one of " + ", ".join(f"--{name}" for name in task.ACTIONS)
                         + " must be set.")
    check_max_seq_length(options.max_seq_length, config, options.bert_config_file,
                         task.LEAST_SEQ_LENGTH)
    check_vocabulary(tokenizer, config, options.vocab_file, options.bert_config_file)
    if options.init_checkpoint:
        try:
            tokenization.validate_case_matches_checkpoint(options.do_lower_case,
                                                          options.init_checkpoint)
        except ValueError as error:
            if not task.CASE_MISMATCH_WARNS:
                raise
            logging.warning("%s", error)
    task.check(options, config)


def run(task, options):
    """Fine-tunes, evaluates, predicts and exports `task` as `options` ask.

    Raises:
      ValueError: an option, a file or the data is wrong; the message names it. Raised
        before training starts wherever it can be known then.
    """
    config = runs.read_config(options)
    tokenizer = tokenization.FullTokenizer(options.vocab_file, options.do_lower_case)
    check(task, options, config, tokenizer)
    num_examples = task.read(options, tokenizer)
    num_train_steps = int(num_examples / options.train_batch_size * options.num_train_epochs)
    if options.do_train and num_train_steps < 1:
        raise ValueError(f"{num_examples} {task.TRAIN_UNITS} x --num_train_epochs="
                         f"{options.num_train_epochs} make no whole batch of "
                         f"--train_batch_size={options.train_batch_size}")

    strategy = options.strategy()
    if options.do_train:
        options.check_train_batch(strategy)
    with runs.output_dir_held(options, strategy) as (chief, write_dir):
        _run_in_output_dir(task, options, config, tokenizer, strategy, chief, write_dir,
                           num_train_steps)


def _run_in_output_dir(task, options, config, tokenizer, strategy, chief, write_dir,
                       num_train_steps):
    """`run` once the inputs are read and output_dir is this run's; this worker writes in
    `write_dir` (`distribution.write_dir`)."""
    if chief:
        files.remove_stale_temps_in(options.output_dir)
    context = Context(options, config, tokenizer, strategy, chief, write_dir,
                      padding_is_inert=task.PADDING_IS_INERT)
    if not task.PADDING_IS_INERT:
        logging.info("This task reads the padded positions, as the original: every batch is "
                     "padded to --max_seq_length=%d", options.max_seq_length)
    elif context.on_tpu and options.dynamic_padding:
        logging.info("TPUs need static shapes: every batch is padded to --max_seq_length=%d "
                     "(--dynamic_padding ignored)", options.max_seq_length)
    logging.info("Batches: %s", context.padding)
    context.trainer = trainer = Trainer(
        task, strategy, config, options.learning_rate, max(num_train_steps, 1),
        int(num_train_steps * options.warmup_proportion), **options.trainer_options())
    head_missing = list(trainer.model.OPTIONAL_VARIABLES)
    if options.init_checkpoint:
        head_missing = trainer.init_from(options.init_checkpoint, options.allow_fewer_layers)

    if options.do_train:
        path = context.record_path("train")

        def dataset_fn(skip_batches):
            # Called once the run has resumed: a checkpoint in output_dir of another task or
            # config is refused before any record is written there, and a finished run
            # writes none.
            task.write_train_records(context, path)
            return task.train_dataset(context, path, skip_batches)

        trainer.train(dataset_fn, options.train_batch_size, options.output_dir, num_train_steps,
                      options.iterations_per_loop, options.save_checkpoints_steps,
                      options.keep_checkpoint_max)
        runs.keep_original(trainer, write_dir)
        head_missing = []
    elif trainer.restore_latest(options.output_dir):
        head_missing = []

    if options.do_eval:
        refuse_untrained(options, head_missing, "evaluate")
        task.evaluate(context)
    if options.do_predict:
        refuse_untrained(options, head_missing, "predict")
        task.predict(context)
    if options.export_dir:
        save_export(task.export_module(context), head_missing, options,
                    options.export_dir if chief else os.path.join(write_dir, "export"))


def save_export(module, head_missing, options, export_dir):
    """Writes the SavedModel to <export_dir>/<version>/ (--export_dir on the chief), refusing
    a model whose task head never came from a checkpoint or from training (it would serve
    random outputs)."""
    if head_missing:
        raise ValueError(f"Nothing to export: --init_checkpoint={options.init_checkpoint} has "
                         f"no task head ({', '.join(head_missing)}) and --output_dir holds no "
                         f"fine-tuned checkpoint; fine-tune with --do_train first")
    directory = export.save_versioned(module, export_dir)
    logging.info("SavedModel for TF Serving: %s", directory)
