"""The TPU and `tf.distribute` flags every training script shares, and what they build.

Importing this module defines the flags; the scripts call `strategy()` first of all TensorFlow
work (multi-worker collectives must be set up at startup).
"""
from absl import flags, logging

from modeling import distribution, training

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
    training.set_precision(FLAGS.precision)
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
    """The keyword arguments of `training.Trainer` the flags set."""
    return {"use_xla": FLAGS.use_xla, "seed": FLAGS.seed, "optimizer": FLAGS.optimizer,
            "num_accumulation_steps": FLAGS.num_accumulation_steps}
