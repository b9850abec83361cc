"""Pre-training on any `tf.distribute` strategy: the original's step, loops, checkpoints, eval.

A step is the original's: forward, the masked-LM and next-sentence losses over the *global*
batch, gradients summed over replicas, clipped to global norm 1.0, AdamWeightDecay. Each
replica normalizes its part of the loss by global counts (masked-LM weights all-reduced, the
global batch size), so N replicas compute the same update as one device with the same batch.
"""
import os
import tempfile
import time

import keras
import tensorflow as tf
from absl import logging

from modeling import checkpoint, distribution, optimization
from modeling.heads import MASKED_LM_LOSS_EPSILON, BertPretrainer

SUM = tf.distribute.ReduceOp.SUM
STEP_METRICS = ("loss", "mlm_loss", "nsp_loss", "mlm_correct", "mlm_weight", "mlm_loss_sum",
                "nsp_correct", "nsp_loss_sum", "examples")
EVAL_KEYS = ("global_step", "loss", "masked_lm_accuracy", "masked_lm_loss",
             "next_sentence_accuracy", "next_sentence_loss")


def _global_counts(batch):
    """Σ masked-LM weights and the number of examples over all replicas (a sync point, so it
    stays outside any nested, possibly XLA-compiled, function)."""
    context = tf.distribute.get_replica_context()
    weights = batch["masked_lm_weights"]
    return (context.all_reduce(SUM, tf.reduce_sum(weights)),
            context.all_reduce(SUM, tf.cast(tf.shape(weights)[0], tf.float32)))


def _replica_losses(outputs, batch, global_weight, global_batch):
    """This replica's share of the global losses, and its metric counts."""
    weights = batch["masked_lm_weights"]
    mlm_loss = (tf.reduce_sum(weights * outputs["masked_lm_example_loss"])
                / (global_weight + MASKED_LM_LOSS_EPSILON))
    nsp_loss = tf.reduce_sum(outputs["next_sentence_example_loss"]) / global_batch
    mlm_predictions = tf.argmax(outputs["masked_lm_log_probs"], -1, output_type=tf.int32)
    nsp_predictions = tf.argmax(outputs["next_sentence_log_probs"], -1, output_type=tf.int32)
    labels = tf.reshape(batch["next_sentence_labels"], [-1])
    counts = {
        "mlm_correct": tf.reduce_sum(
            weights * tf.cast(tf.equal(mlm_predictions, batch["masked_lm_ids"]), tf.float32)),
        "mlm_weight": tf.reduce_sum(weights),
        "mlm_loss_sum": tf.reduce_sum(weights * outputs["masked_lm_example_loss"]),
        "nsp_correct": tf.reduce_sum(tf.cast(tf.equal(nsp_predictions, labels), tf.float32)),
        "nsp_loss_sum": tf.reduce_sum(outputs["next_sentence_example_loss"]),
        "examples": tf.cast(tf.shape(labels)[0], tf.float32),
    }
    return mlm_loss, nsp_loss, counts


class Pretrainer:
    """Owns the model, optimizer, checkpoints and compiled loops of one pre-training run."""

    def __init__(self, strategy, config, learning_rate, num_train_steps, num_warmup_steps,
                 use_xla=False, seed=12345, optimizer="adamw", num_accumulation_steps=1):
        self.strategy = strategy
        self.num_accumulation_steps = num_accumulation_steps
        keras.utils.set_random_seed(seed)  # initial weights and dropout masks
        with strategy.scope():
            self.model = BertPretrainer(config)
            self.optimizer = optimization.create_optimizer(
                learning_rate, num_train_steps, num_warmup_steps, optimizer)
            self.optimizer.build(self.model.trainable_variables)
            self.loss_scale = LossScale() if self.model.compute_dtype == "float16" else None
        # The dropout generators' states are saved too, so that a resumed run draws the masks
        # an uninterrupted one would have drawn.
        dropout_seeds = [layer.seed_generator.state for layer in self.model._flatten_layers()
                         if getattr(layer, "seed_generator", None) is not None]
        extra = {"loss_scale": self.loss_scale} if self.loss_scale else {}
        self.checkpoint = tf.train.Checkpoint(model=self.model, optimizer=self.optimizer,
                                              dropout_seeds=dropout_seeds, **extra)
        self._forward_backward = tf.function(self._forward_backward_fn, jit_compile=use_xla)

    @property
    def global_step(self):
        return int(self.optimizer.iterations.numpy())

    def init_from(self, init_checkpoint):
        """Starts from an original name-based checkpoint or one of this project's."""
        path = checkpoint.resolve_checkpoint(init_checkpoint)
        names = dict(tf.train.list_variables(path))
        if any(name.startswith("bert/") for name in names):
            result = checkpoint.load_original(self.model, path)
            logging.info("Initialized %d variables from %s", len(result.loaded), path)
        else:
            tf.train.Checkpoint(model=self.model).read(path).expect_partial()
            logging.info("Initialized the model from %s", path)

    def _forward_backward_fn(self, batch, global_weight, global_batch, loss_scale):
        variables = self.model.trainable_variables
        with tf.GradientTape() as tape:
            outputs = self.model(batch, training=True)
            mlm_loss, nsp_loss, counts = _replica_losses(outputs, batch, global_weight,
                                                         global_batch)
            loss = mlm_loss + nsp_loss
            scaled_loss = loss * loss_scale  # keeps float16 gradients from underflowing
        gradients = tape.gradient(scaled_loss, variables)
        # Dense, as the original's (its embeddings are one-hot matmuls), before summing.
        gradients = [tf.convert_to_tensor(g) for g in gradients]
        return gradients, dict(counts, loss=loss, mlm_loss=mlm_loss, nsp_loss=nsp_loss)

    def _train_step(self, batch):
        scale = self.loss_scale.value() if self.loss_scale else tf.constant(1.0)
        counts = _global_counts(batch) + (scale,)
        if self.num_accumulation_steps == 1:
            gradients, metrics = self._forward_backward(batch, *counts)
        else:
            gradients, metrics = self._accumulate(batch, counts)
        context = tf.distribute.get_replica_context()
        gradients = context.all_reduce(SUM, gradients)
        if self.loss_scale:
            gradients = [g / scale for g in gradients]
        clipped, norm = tf.clip_by_global_norm(gradients, optimization.CLIP_NORM)
        if self.loss_scale:
            # An overflow skips the step: no change to weights, slots or the step count.
            finite = tf.math.is_finite(norm)
            self.optimizer.apply_condition = finite
            self.optimizer.apply_gradients(zip(clipped, self.model.trainable_variables))
            self.optimizer.apply_condition = None
            self.optimizer.iterations.assign_sub(tf.cast(tf.logical_not(finite), tf.int64))
            self.loss_scale.update(finite)
        else:
            self.optimizer.apply_gradients(zip(clipped, self.model.trainable_variables))
        return metrics

    def _accumulate(self, batch, counts):
        """Sums the gradients of consecutive micro-batches, one at a time so that only one
        micro-batch's activations are alive. The losses are already normalized by the counts
        of the whole batch, so the sum is the whole batch's gradient."""
        size = tf.shape(batch["input_ids"])[0] // self.num_accumulation_steps
        gradients = [tf.zeros_like(v) for v in self.model.trainable_variables]
        metrics = {key: tf.constant(0.0) for key in STEP_METRICS}
        for index in tf.range(self.num_accumulation_steps):
            micro_batch = {name: value[index * size:(index + 1) * size]
                           for name, value in batch.items()}
            micro_gradients, micro_metrics = self._forward_backward(micro_batch, *counts)
            gradients = [total + g for total, g in zip(gradients, micro_gradients)]
            metrics = {key: metrics[key] + micro_metrics[key] for key in STEP_METRICS}
        return gradients, metrics

    @tf.function
    def _train_loop(self, iterator, steps):
        totals = {key: 0.0 for key in STEP_METRICS}
        for _ in tf.range(steps):
            per_replica = self.strategy.run(self._train_step, args=(next(iterator),))
            totals = {key: total + self.strategy.reduce(SUM, per_replica[key], axis=None)
                      for key, total in totals.items()}
        return totals

    @tf.function
    def _eval_step(self, batch):
        def step(batch):
            outputs = self.model(batch, training=False)
            mlm_loss, nsp_loss, counts = _replica_losses(outputs, batch,
                                                         *_global_counts(batch))
            return dict(counts, loss=mlm_loss + nsp_loss)
        per_replica = self.strategy.run(step, args=(batch,))
        return {key: self.strategy.reduce(SUM, value, axis=None)
                for key, value in per_replica.items()}

    def train(self, dataset_fn, output_dir, num_train_steps, iterations_per_loop,
              save_checkpoints_steps, keep_checkpoints=5):
        """Trains to `num_train_steps`, resuming from the latest checkpoint in `output_dir`.

        Args:
          dataset_fn: callable(skip_batches) -> the global-batch training dataset, deterministic,
            starting after the batches already trained on.
        """
        chief = distribution.is_chief(self.strategy)
        # Every worker takes part in saving (collectives); only the chief's files are kept.
        directory = output_dir if chief else tempfile.mkdtemp(prefix="worker_checkpoint_")
        manager = tf.train.CheckpointManager(self.checkpoint, directory,
                                             max_to_keep=keep_checkpoints, checkpoint_name="ckpt")
        if manager.latest_checkpoint:
            self.checkpoint.restore(manager.latest_checkpoint).assert_existing_objects_matched()
            logging.info("Resumed from %s at step %d", manager.latest_checkpoint,
                         self.global_step)
        step = self.global_step
        if step >= num_train_steps:
            return step
        iterator = iter(self.strategy.experimental_distribute_dataset(
            _shard_by_data(dataset_fn(step))))
        writer = tf.summary.create_file_writer(os.path.join(output_dir, "train")) if chief \
            else tf.summary.create_noop_writer()
        while step < num_train_steps:
            next_save = (step // save_checkpoints_steps + 1) * save_checkpoints_steps
            steps = min(iterations_per_loop, next_save - step, num_train_steps - step)
            learning_rate = float(self.optimizer.learning_rate)
            start = time.time()
            totals = {k: float(v) for k, v in
                      self._train_loop(iterator, tf.constant(steps, tf.int32)).items()}
            elapsed = time.time() - start
            step = self.global_step
            scalars = {
                "loss": totals["loss"] / steps,
                "masked_lm_loss": totals["mlm_loss"] / steps,
                "next_sentence_loss": totals["nsp_loss"] / steps,
                "masked_lm_accuracy": totals["mlm_correct"] / max(totals["mlm_weight"], 1e-9),
                "next_sentence_accuracy": totals["nsp_correct"] / max(totals["examples"], 1),
                "learning_rate": learning_rate,
                "examples_per_second": totals["examples"] / elapsed,
            }
            logging.info("step %d: %s", step, ", ".join(f"{k} {v:.5g}"
                                                         for k, v in scalars.items()))
            with writer.as_default(step=step):
                for name, value in scalars.items():
                    tf.summary.scalar(name, value)
            if step % save_checkpoints_steps == 0 or step == num_train_steps:
                manager.save(checkpoint_number=step)
        writer.flush()
        return step

    def evaluate(self, dataset, max_eval_steps):
        """The original's eval metrics over at most `max_eval_steps` batches, in order."""
        totals, batches = {}, 0
        for batch in self.strategy.experimental_distribute_dataset(_shard_by_data(dataset)):
            if batches >= max_eval_steps:
                break
            for key, value in self._eval_step(batch).items():
                totals[key] = totals.get(key, 0.0) + float(value)
            batches += 1
        if not batches:
            raise ValueError("the evaluation input has no complete batch")
        return {
            "global_step": self.global_step,
            "loss": totals["loss"] / batches,
            "masked_lm_accuracy": totals["mlm_correct"] / totals["mlm_weight"],
            "masked_lm_loss": totals["mlm_loss_sum"] / totals["mlm_weight"],
            "next_sentence_accuracy": totals["nsp_correct"] / totals["examples"],
            "next_sentence_loss": totals["nsp_loss_sum"] / totals["examples"],
        }

    def export_original(self, path):
        """Writes the model, its Adam slots and `global_step` in the original name-based format,
        as the original's `model.ckpt-N` files, for run_classifier.py and the original tools."""
        slots = {}
        for variable, m, v in zip(self.model.trainable_variables, self.optimizer.adam_m,
                                  self.optimizer.adam_v):
            name = checkpoint.checkpoint_name(variable)
            slots[f"{name}/adam_m"] = m
            slots[f"{name}/adam_v"] = v
        checkpoint.save_original(self.model, path, global_step=self.global_step,
                                 extra_tensors=slots)


class LossScale(tf.Module):
    """Dynamic loss scaling for float16: halve on overflow, double after 2000 finite steps."""

    def __init__(self, initial=2.0 ** 15, growth_interval=2000):
        super().__init__(name="loss_scale")
        only_first = tf.VariableAggregation.ONLY_FIRST_REPLICA
        self.scale = tf.Variable(initial, trainable=False, aggregation=only_first)
        self.good_steps = tf.Variable(0, dtype=tf.int64, trainable=False, aggregation=only_first)
        self.growth_interval = growth_interval

    def value(self):
        return tf.identity(self.scale)

    def update(self, finite):
        good_steps = tf.where(finite, self.good_steps + 1, 0)
        grow = good_steps >= self.growth_interval
        self.scale.assign(tf.where(finite, tf.where(grow, self.scale * 2.0, self.scale),
                                   tf.maximum(self.scale / 2.0, 1.0)))
        self.good_steps.assign(tf.where(grow, tf.zeros_like(good_steps), good_steps))


def _shard_by_data(dataset):
    """Each global batch is split across all replicas of all workers, so a step on N workers
    sees the examples one device would. (Sharding by file would give each worker other
    records, and fails outright with fewer files than workers.)"""
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return dataset.with_options(options)


def write_eval_results(results, path):
    """`key = value` lines in the original's order, written atomically."""
    temp = f"{path}.tmp-{os.getpid()}"
    with tf.io.gfile.GFile(temp, "w") as writer:
        for key in EVAL_KEYS:
            writer.write(f"{key} = {results[key]}\n")
    tf.io.gfile.rename(temp, path, overwrite=True)


def set_precision(name):
    """'float32', 'mixed_bfloat16' or 'mixed_float16' (then with dynamic loss scaling) for
    every model built afterwards."""
    keras.mixed_precision.set_dtype_policy(name)
