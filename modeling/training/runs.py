"""What the pre-training run and the fine-tuning run share: how they start, in this order, and
the original-format checkpoint they leave after training.

  config = runs.read_config(options)          # options checked, XLA's cache and threads set
  ...                                         # the run's own checks and reads
  strategy = options.strategy()
  with runs.output_dir_held(options, strategy) as (chief, write_dir):
      ...                                     # train, evaluate, ...
"""
import contextlib
import os

import tensorflow as tf
from absl import logging

from modeling.encoder.config import BertConfig
from modeling.runtime import compilation_cache, cpu_threads, output_lock
from modeling.training import distribution
from modeling.training.options import ORIGINAL_CHECKPOINT_DIR


def read_config(options):
    """Checks `options` (a `TrainingOptions` with a `bert_config_file`), turns on XLA's
    compilation cache, sets the threads of its parallel micro-batches and reads the model's
    config: a run's first steps.

    Returns:
      The `BertConfig` of --bert_config_file.

    Raises:
      ValueError: an option is wrong, or the config cannot be read; the message names it.
    """
    options.check()
    compilation_cache.enable(options.xla_cache_dir)  # before TensorFlow reads XLA's settings
    cpu_threads.split_over(options.parallel_micro_batches)  # before TensorFlow's first op
    return BertConfig.from_json_file(options.bert_config_file)


@contextlib.contextmanager
def output_dir_held(options, strategy):
    """Makes output_dir and, for a training run, holds it (`output_lock`: one training run at
    a time) on the chief; evaluating the checkpoints of a run in progress, as the original's
    separate eval jobs do, is left free. Taken before the run's long work (writing or checking
    records), so that a second run is told at once.

    Yields:
      (chief: whether this worker keeps the results, write_dir: where it writes,
      `distribution.write_dir`: output_dir on the chief).
    """
    chief = distribution.is_chief(strategy)
    tf.io.gfile.makedirs(options.output_dir)
    with output_lock.held(options.output_dir) if chief and options.do_train \
            else contextlib.nullcontext():
        with distribution.write_dir(strategy, options.output_dir) as write_dir:
            yield chief, write_dir


def keep_original(trainer, write_dir):
    """Writes the model in the original name-based format with its Adam slots to
    <write_dir>/export/bert_model.ckpt (`distribution.write_dir`: output_dir on the chief),
    for the original tools and the other scripts."""
    path = os.path.join(write_dir, ORIGINAL_CHECKPOINT_DIR, "bert_model.ckpt")
    trainer.export_original(path)
    logging.info("Original-format checkpoint: %s", path)
