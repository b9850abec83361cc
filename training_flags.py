"""The TPU and `tf.distribute` flags every training script shares, and what they build.

Importing this module defines the flags; the scripts call `strategy()` first of all TensorFlow
work (multi-worker collectives must be set up at startup).
"""
import collections
import os
import tempfile

import tensorflow as tf
from absl import flags, logging

from modeling import BertConfig, export
from modeling.training import distribution
from modeling.text import tokenization
from modeling.training import trainer

FLAGS = flags.FLAGS
flags.DEFINE_bool("use_tpu", False, "Whether to use a TPU (same as "
                  "--distribution_strategy=tpu).")
flags.DEFINE_string("tpu_name", None, "The Cloud TPU to use.")
flags.DEFINE_string("tpu_zone", None, "GCE zone of the Cloud TPU.")
flags.DEFINE_string("gcp_project", None, "Project of the Cloud TPU.")
flags.DEFINE_string("master", None, "TPU address, instead of --tpu_name.")
flags.DEFINE_integer("num_tpu_cores", 8, "TPU cores expected (checked against the TPU).")
flags.DEFINE_enum("distribution_strategy", "one_device", list(distribution.STRATEGIES),
                  "one_device, mirrored (all local GPUs), multi_worker_mirrored (TF_CONFIG) "
                  "or tpu.")
flags.DEFINE_bool("use_xla", False, "Compile the forward and backward pass with XLA.")
flags.DEFINE_enum("precision", "float32", ["float32", "mixed_bfloat16", "mixed_float16"],
                  "Compute dtype; variables stay float32. mixed_float16 (for GPUs) adds dynamic "
                  "loss scaling.")
flags.DEFINE_integer("keep_checkpoint_max", 5, "Checkpoints kept in --output_dir.")
flags.DEFINE_enum("optimizer", "adamw", ["adamw", "lamb"], "adamw: the original's "
                  "AdamWeightDecay; lamb: LAMB, for large batches.")
flags.DEFINE_integer("num_accumulation_steps", 1, "Split each replica's batch into this many "
                     "micro-batches and sum their gradients: the same update in less memory.")
flags.DEFINE_integer("seed", 12345, "Seed of the initial weights, dropout and data shuffling.")


def strategy():
    """The strategy the flags name, with the precision they ask for set for later models."""
    chosen = distribution.get_strategy(
        "tpu" if FLAGS.use_tpu else FLAGS.distribution_strategy, FLAGS.tpu_name,
        FLAGS.tpu_zone, FLAGS.gcp_project, FLAGS.master)
    if FLAGS.use_tpu and chosen.num_replicas_in_sync != FLAGS.num_tpu_cores:
        logging.warning("--num_tpu_cores=%d but the TPU has %d cores; using %d",
                        FLAGS.num_tpu_cores, chosen.num_replicas_in_sync,
                        chosen.num_replicas_in_sync)
    trainer.set_precision(FLAGS.precision)
    return chosen


def check_train_batch(strategy, batch_size_flag="train_batch_size"):
    """Raises ValueError unless the global batch splits over replicas and micro-batches."""
    if FLAGS.num_accumulation_steps < 1:
        raise ValueError(f"--num_accumulation_steps must be positive, "
                         f"got {FLAGS.num_accumulation_steps}")
    batch_size = getattr(FLAGS, batch_size_flag)
    replicas = strategy.num_replicas_in_sync
    if batch_size % (replicas * FLAGS.num_accumulation_steps):
        raise ValueError(f"--{batch_size_flag}={batch_size} is not divisible by {replicas} "
                         f"replicas x --num_accumulation_steps={FLAGS.num_accumulation_steps}")


def trainer_options():
    """The keyword arguments of `trainer.Trainer` the flags set."""
    return {"use_xla": FLAGS.use_xla, "seed": FLAGS.seed, "optimizer": FLAGS.optimizer,
            "num_accumulation_steps": FLAGS.num_accumulation_steps}


def check_task_flags(config, tokenizer, actions, positive, case_mismatch_warns=False):
    """The checks every fine-tuning script makes before any work, as one-line ValueErrors.

    Args:
      actions: names of flags of which at least one must be set (do_train, ...).
      positive: names of int flags that must be > 0.
      case_mismatch_warns: log, not raise, when --do_lower_case disagrees with the name of
        --init_checkpoint (the original raises).
    """
    if not any(getattr(FLAGS, name) for name in actions):
        raise ValueError("At least one of " + ", ".join(f"--{name}" for name in actions)
                         + " must be set.")
    for name in positive:
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
        try:
            tokenization.validate_case_matches_checkpoint(FLAGS.do_lower_case,
                                                          FLAGS.init_checkpoint)
        except ValueError as error:
            if not case_mismatch_warns:
                raise
            logging.warning("%s", error)


def check_train_steps(num_train_steps, examples, what="training examples"):
    if num_train_steps < 1:
        raise ValueError(f"{examples} {what} x --num_train_epochs={FLAGS.num_train_epochs} "
                         f"make no whole batch of --train_batch_size={FLAGS.train_batch_size}")


def train_and_keep_original(trainer, dataset_fn, num_train_steps, chief):
    """Trains (resuming from output_dir), then writes the model in the original name-based
    format with its Adam slots to output_dir/export/bert_model.ckpt."""
    trainer.train(dataset_fn, FLAGS.output_dir, num_train_steps, FLAGS.iterations_per_loop,
                  FLAGS.save_checkpoints_steps, FLAGS.keep_checkpoint_max)
    # Every worker writes (collectives); only the chief's copy is kept.
    path = os.path.join(FLAGS.output_dir if chief else tempfile.mkdtemp(), "export",
                        "bert_model.ckpt")
    trainer.export_original(path)
    logging.info("Original-format checkpoint: %s", path)


def save_export(module, head_missing, chief):
    """Writes the SavedModel to --export_dir/<version>/, refusing a model whose task head
    never came from a checkpoint or from training (it would serve random outputs)."""
    if head_missing:
        raise ValueError(f"Nothing to export: --init_checkpoint={FLAGS.init_checkpoint} has no "
                         f"task head ({', '.join(head_missing)}) and --output_dir holds no "
                         f"fine-tuned checkpoint; fine-tune with --do_train first")
    directory = export.save_versioned(
        module, FLAGS.export_dir if chief else tempfile.mkdtemp(prefix="export_"))
    logging.info("SavedModel for TF Serving: %s", directory)


def define_fine_tuning_flags(max_seq_length=128, train_batch_size=32, learning_rate=5e-5,
                             do_lower_case=True, with_eval=True):
    """Defines the flags the fine-tuning scripts share, with the original's names and the
    script's defaults; bert_config_file, vocab_file and output_dir are required."""
    flags.DEFINE_string("bert_config_file", None, "The config json file of the model.")
    flags.DEFINE_string("vocab_file", None, "The vocabulary file of the model.")
    flags.DEFINE_string("output_dir", None, "Where features, checkpoints and results go.")
    flags.DEFINE_string("init_checkpoint", None, "Initial checkpoint: an original one "
                        "(Google's, or one fine-tuned with this task's head) or one of ours.")
    flags.DEFINE_bool("do_lower_case", do_lower_case, "Lower-case the input (uncased models).")
    flags.DEFINE_integer("max_seq_length", max_seq_length, "Tokens per sequence after "
                         "WordPiece, [CLS] and [SEP]; longer input is cut, shorter padded.")
    flags.DEFINE_bool("do_train", False, "Whether to fine-tune on the training set.")
    flags.DEFINE_bool("do_predict", False, "Whether to predict the test set.")
    flags.DEFINE_integer("train_batch_size", train_batch_size, "Global batch size for "
                         "training.")
    flags.DEFINE_integer("predict_batch_size", 8, "Global batch size for predict.")
    if with_eval:
        flags.DEFINE_bool("do_eval", False, "Whether to evaluate on the dev set.")
        flags.DEFINE_integer("eval_batch_size", 8, "Global batch size for eval.")
    flags.DEFINE_float("learning_rate", learning_rate, "The initial learning rate for Adam.")
    flags.DEFINE_float("num_train_epochs", 3.0, "Total number of training epochs.")
    flags.DEFINE_float("warmup_proportion", 0.1, "Fraction of training for linear warm-up.")
    flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save a checkpoint.")
    flags.DEFINE_integer("iterations_per_loop", 1000, "Steps in each compiled loop call.")
    flags.DEFINE_string("export_dir", None, "Write a SavedModel for TF Serving to "
                        "export_dir/<version>/ (after training, or from a checkpoint alone).")
    for name in ("bert_config_file", "vocab_file", "output_dir"):
        flags.mark_flag_as_required(name)


Run = collections.namedtuple("Run", ["config", "tokenizer", "strategy", "chief", "record_dir"])


def start(check_flags):
    """What every fine-tuning script does first: reads the config and vocab, runs the
    script's `check_flags(config, tokenizer)`, picks the strategy (first of all TensorFlow
    work) and makes output_dir. Every worker writes and reads its own copy of the records;
    `record_dir` is output_dir on the chief, a temporary directory elsewhere."""
    config = BertConfig.from_json_file(FLAGS.bert_config_file)
    tokenizer = tokenization.FullTokenizer(FLAGS.vocab_file, FLAGS.do_lower_case)
    check_flags(config, tokenizer)
    chosen = strategy()
    chief = distribution.is_chief(chosen)
    tf.io.gfile.makedirs(FLAGS.output_dir)
    record_dir = FLAGS.output_dir if chief else tempfile.mkdtemp(prefix="records_")
    return Run(config, tokenizer, chosen, chief, record_dir)
