"""Training on any `tf.distribute` strategy: the original's step, loops and checkpoints.

A step is the original's: forward, the task's loss over the *global* batch, gradients summed
over replicas, clipped to global norm 1.0, the original optimizer. Each replica normalizes its
share of the loss by global counts (all-reduced before the forward pass), so N replicas compute
the update one device computes for the same batch. What is trained, the model and its loss, is
an `Objective` (a fine-tuning task, a pre-training objective) that the one `Trainer` takes.
"""
import contextlib
import functools
import math
import os
import re
import time

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from modeling import internals
from modeling.checkpoints import name_based
from modeling.training import checkpoint_dir
from modeling.training import compile_ahead
from modeling.training import distribution
from modeling.training import loop_cache
from modeling.training import optimization
from modeling.training.objective import SUM
from modeling.training.progress import PassProgress, TrainingProgress

# A gather's gradient for a variable this large goes to the optimizer as its rows, not dense
# (`AdamWeightDecay.updates_rows`): making a vocabulary's embeddings' gradient dense, taking its
# norm and reading it in the update cost a fine-tuning step a pass over 47 MB each (MiniLM)
# where a few hundred rows changed. Smaller tables (token types) keep the dense gradient: it
# costs little, and the rows' update traces a dozen more operations and three compiled passes.
ROWS_MIN_ELEMENTS = 1 << 20


@contextlib.contextmanager
def graph_optimizer(enabled):
    """Calls of tf.functions inside run with grappler on or off. TensorFlow keeps a
    function's optimized graph per option set: every call of one function must be made with
    the same setting, or its graph is optimized anew."""
    before = tf.config.optimizer.get_experimental_options().get("disable_meta_optimizer", False)
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": not enabled})
    try:
        yield
    finally:
        tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": before})


class Trainer:
    """Owns an objective's model, optimizer, checkpoints and compiled loops.

    The objective (`objective.Objective`) builds the model and defines the loss: its METRICS,
    build_model(config), global_counts(batch), replica_loss(outputs, batch, *counts) and
    loop_scalars(totals, steps).

    The model declares what the trainer needs to know about its variables:
      OPTIONAL_VARIABLES: checkpoint names of head variables a pre-trained checkpoint lacks.
      UNTRAINED_PREFIXES: checkpoint-name prefixes of variables the task's loss never reaches
        (the pooler, for span heads); the original's optimizer skips their None gradients,
        so they get no update and no weight decay.

    `loop_cache_dir`: where the training loop traced by a run is kept for the next run of the
    same code and settings, which then loads it instead of tracing it (`loop_cache`; on CPUs,
    one replica); None: every run traces its own.

    `parallel_micro_batches`: each batch (each micro-batch of an accumulating step) splits
    into this many parts whose forward and backward passes, and predictions, share no op, so
    that the executor's inter-op threads run them side by side; the update then runs in as
    many chains of variables. For CPUs, with the threads `cpu_threads.split_over` sets before
    TensorFlow's first op: each op then runs on cores of its own instead of sharding over all
    of them, and a step trains faster (benchmarks/history/parallel_micro_batches.md).
    """

    def __init__(self, objective, strategy, config, learning_rate, num_train_steps,
                 num_warmup_steps, use_xla=False, seed=12345, optimizer="adamw",
                 num_accumulation_steps=1, progress_seconds=30.0, loop_cache_dir=None,
                 parallel_micro_batches=1):
        self.objective, self.config, self.use_xla = objective, config, use_xla
        self.loop_cache_dir = loop_cache_dir
        self.strategy = strategy
        self.progress_seconds = progress_seconds
        self.num_accumulation_steps = num_accumulation_steps
        self.parallel_micro_batches = parallel_micro_batches
        keras.utils.set_random_seed(seed)  # initial weights and dropout masks
        with strategy.scope():
            self.model = objective.build_model(config)
            self.optimizer = optimization.create_optimizer(
                learning_rate, num_train_steps, num_warmup_steps, optimizer)
            self.optimizer.update_chains = parallel_micro_batches
            self.optimizer.build(self.trained_variables)
            self.loss_scale = LossScale() if self.model.compute_dtype == "float16" else None
        # The dropout generators' states are saved too, so that a resumed run draws the masks
        # an uninterrupted one would have drawn.
        dropout_seeds = [layer.seed_generator.state for layer in internals.all_layers(self.model)
                         if getattr(layer, "seed_generator", None) is not None]
        extra = {"loss_scale": self.loss_scale} if self.loss_scale else {}
        self._state = dict(model=self.model, optimizer=self.optimizer,
                           dropout_seeds=dropout_seeds, **extra)
        # What a checkpoint must hold to be resumed from; `train` saves its batch size too.
        self.checkpoint = tf.train.Checkpoint(**self._state)
        # A function of its own only to be compiled whole (`use_xla`): called as one, its 105
        # gradients and its captures cost 350 more graph operations to trace.
        self._compiled_forward_backward = tf.function(self._forward_backward_fn,
                                                      jit_compile=True, autograph=False)
        # The micro-batches' passes are one function, traced once and called for each: traced
        # inline for each, they cost a cold first step 0.55 s more (3.7 against 3.2 s), a warm
        # one no less (benchmarks/history/parallel_micro_batches.md).
        self._part_forward_backward = tf.function(
            functools.partial(self._forward_backward_fn, dense=False), autograph=False)
        self._on_cpus = distribution.on_cpus(strategy)
        self._kept_loop = None  # the loop kept across runs (`loop_cache`); False: none
        self._compiling_ahead = None  # `compile_ahead`'s thread, during the first loop
        # Batches of several lengths (dynamic padding) trace it twice, then at any length.
        self._predict_step = tf.function(self._predict_step_fn, reduce_retracing=True,
                                         autograph=False)

    @property
    def trained_variables(self):
        """The model's trainable variables but those under its UNTRAINED_PREFIXES."""
        return [v for v in self.model.trainable_variables
                if not name_based.checkpoint_name(v).startswith(self.model.UNTRAINED_PREFIXES)]

    @property
    def global_step(self):
        return int(self.optimizer.iterations.numpy())

    def init_from(self, init_checkpoint, allow_fewer_layers=False):
        """Starts from an original name-based checkpoint or one written by these scripts; the
        model's OPTIONAL_VARIABLES (its new head) may be missing and keep their initial values.
        `allow_fewer_layers`: an original checkpoint of more encoder layers than the model
        gives its first ones (`name_based.load_original`).

        Returns:
          The checkpoint names of the variables the checkpoint did not have, but those under
          the model's UNTRAINED_PREFIXES: the task's outputs do not depend on them.
        """
        try:
            return self._init_from(name_based.open_checkpoint(init_checkpoint),
                                   allow_fewer_layers)
        except name_based.UnreadableCheckpoint as error:
            raise ValueError(f"--init_checkpoint={init_checkpoint}: {error}") from None

    def _init_from(self, reader, allow_fewer_layers):
        path = reader.path
        if any(name.startswith("bert/") for name in reader.shapes):
            result = name_based.load_original(self.model, path, self.model.OPTIONAL_VARIABLES,
                                              allow_fewer_layers)
            logging.info("Initialized %d variables from %s", len(result.loaded), path)
            if result.not_found:
                logging.info("Not in %s, initialized randomly: %s", path,
                             ", ".join(result.not_found))
            return [name for name in result.not_found
                    if not name.startswith(self.model.UNTRAINED_PREFIXES)]
        with name_based.reading(reader.data):
            status = tf.train.Checkpoint(model=self.model).read(path)
            try:
                status.assert_existing_objects_matched()
            except AssertionError:
                # A checkpoint of another task (pre-training, say): its encoder must all be
                # there.
                encoder = tf.train.Checkpoint(bert=self.model.bert)
                tf.train.Checkpoint(model=encoder).read(path).assert_existing_objects_matched()
                logging.info("Initialized the encoder from %s; the task head is new", path)
                return [name_based.checkpoint_name(v) for v in self.model.weights
                        if not name_based.checkpoint_name(v).startswith("bert/")]
        logging.info("Initialized the model from %s", path)
        return []

    def _forward_backward_fn(self, batch, counts, loss_scale, dense=True):
        variables = self.trained_variables
        with tf.GradientTape() as tape:
            outputs = self.model(batch, training=True)
            loss, metrics = self.objective.replica_loss(outputs, batch, *counts)
            scaled_loss = loss * loss_scale  # keeps float16 gradients from underflowing
        gradients = tape.gradient(scaled_loss, variables)
        if dense:  # as the original's (its embeddings are one-hot matmuls), before summing
            gradients = [tf.convert_to_tensor(g) for g in gradients]
        return gradients, dict(metrics, loss=loss)

    def _gradients(self, batch, counts, loss_scale, rows=False):
        """The batch's gradients and metrics; with `parallel_micro_batches`, those of its parts,
        computed side by side and summed (a gather's `IndexedSlices` by concatenating their
        rows). Each gradient is made dense once, or with `rows` a large gather's is kept as its
        rows summed by index (`summed_rows`)."""
        results = [self._part_gradients(part, counts, loss_scale)
                   for part in micro_batches(batch, self.parallel_micro_batches)]
        gradients = [_dense_or_rows(_summed(parts), variable, rows) for parts, variable in zip(
            zip(*(gradients for gradients, _ in results)), self.trained_variables)]
        return gradients, _summed_metrics([metrics for _, metrics in results])

    def _part_gradients(self, part, counts, loss_scale):
        """A micro-batch's gradients (a gather's as `IndexedSlices`, but under `use_xla`) and
        metrics."""
        if self.use_xla:
            return self._compiled_forward_backward(part, counts, loss_scale)
        if self.parallel_micro_batches > 1:
            return self._part_forward_backward(part, counts, loss_scale)
        return self._forward_backward_fn(part, counts, loss_scale, dense=False)

    def _train_step(self, batch):
        scale = self.loss_scale.value() if self.loss_scale else tf.constant(1.0)
        counts = self.objective.global_counts(batch)
        context = tf.distribute.get_replica_context()
        if self.num_accumulation_steps == 1:
            # Summed over replicas, the gradients must be dense.
            rows = self.optimizer.updates_rows and context.num_replicas_in_sync == 1
            gradients, metrics = self._gradients(batch, counts, scale, rows)
        else:
            gradients, metrics = self._accumulate(batch, counts, scale)
        if context.num_replicas_in_sync > 1:  # one replica's sum is its own gradients
            gradients = context.all_reduce(SUM, gradients)
        if self.loss_scale:
            gradients = [_divided(g, scale) for g in gradients]
        # Clipped to global norm 1.0 by the update itself (optimization.clip_scale).
        scale, norm = optimization.clip_scale(gradients)
        # Under loss scaling an overflow skips the step: no change to weights, slots or the
        # step count.
        finite = tf.math.is_finite(norm) if self.loss_scale else None
        self.optimizer.apply_scaled_gradients(zip(gradients, self.trained_variables), scale,
                                              finite)
        if self.loss_scale:
            self.optimizer.iterations.assign_sub(tf.cast(tf.logical_not(finite), tf.int64))
            self.loss_scale.update(finite)
        # Every task's progress shows examples/s: the rows of this replica's batch.
        metrics.setdefault("examples", tf.cast(tf.shape(batch["input_ids"])[0], tf.float32))
        return metrics

    def _accumulate(self, batch, counts, scale):
        """Sums the gradients of consecutive micro-batches, one at a time so that only one
        micro-batch's activations are alive. The losses are already normalized by the counts
        of the whole batch, so the sum is the whole batch's gradient."""
        size = tf.shape(batch["input_ids"])[0] // self.num_accumulation_steps

        def add_micro_batch(index, gradients, metrics):
            micro_batch = _rows(batch, index * size, (index + 1) * size)
            micro_gradients, micro_metrics = self._gradients(micro_batch, counts, scale)
            return (index + 1, [total + g for total, g in zip(gradients, micro_gradients)],
                    {key: metrics[key] + micro_metrics[key] for key in self.objective.METRICS})

        # One iteration at a time: the loop's default runs up to 10 at once wherever nothing
        # orders them, and the micro-batches' forward passes depend on nothing of each other.
        _, gradients, metrics = tf.while_loop(
            lambda index, *_: index < self.num_accumulation_steps, add_micro_batch,
            (tf.constant(0), [tf.zeros_like(v) for v in self.trained_variables],
             {key: tf.constant(0.0) for key in self.objective.METRICS}),
            parallel_iterations=1)
        return gradients, metrics

    def _train_loop(self, iterator, steps):
        """Runs `steps` training steps, or fewer when the loss goes non-finite (a diverging
        run): then it stops one step after the first such step.

        On CPUs the loop's graph runs as traced, without TensorFlow's graph optimizer
        (grappler): it took about a second of every run's first step (0.65 s net of the
        larger graph's instantiation), and the steps after it were as fast without it
        (benchmarks/history/speedups.md, first_step.md). Elsewhere it is unmeasured and kept.
        On CPUs with one replica the first call also loads the loop an earlier run of the same
        code and settings kept, instead of tracing it (`loop_cache`).

        Returns:
          dict of scalars: the METRICS and "examples" summed over the steps run (float32; a
          non-finite "loss" if one was), and "diverged_at" (int64): the global step number,
          counted from 1, of the first step whose loss was not finite, else 0.
        """
        with graph_optimizer(enabled=not self._on_cpus):
            if self._kept_loop is None:
                self._kept_loop = self._kept_or_traced_and_kept(iterator, steps)
            if self._kept_loop and iterator.element_spec == self._kept_spec:
                try:
                    return self._kept_loop(iterator, steps)
                finally:
                    if self._compiling_ahead:
                        self._compiling_ahead.join()
                        self._compiling_ahead = None
            return self._traced_train_loop(iterator, steps)

    def _kept_or_traced_and_kept(self, iterator, steps):
        """The loop an earlier run of the same key kept (`loop_cache`), else the loop traced,
        kept and registered as a later run will load it; False where loops are not kept: on
        accelerators (unmeasured) and with several replicas (a cluster's collectives are keyed
        per process), or without a `loop_cache_dir`."""
        if not (self.loop_cache_dir and self._on_cpus and self.strategy.num_replicas_in_sync == 1
                and not distribution.has_several_workers(self.strategy)):
            return False
        self._kept_spec = iterator.element_spec
        variables = self.loop_variables()
        key = loop_cache.key(self, iterator)
        loop = loop_cache.load(self.loop_cache_dir, key, variables, iterator)
        if not loop:
            loop = loop_cache.keep(
                self.loop_cache_dir, key,
                self._traced_train_loop.get_concrete_function(iterator, steps), variables,
                compile_ahead.describe(self.optimizer.compiled_updates))
        if loop:  # the first step would compile (or load) the update's passes last
            self._compiling_ahead = compile_ahead.start(
                loop.update_programs, lambda name: loop_cache.kept_name(name, key))
        return loop or False

    def loop_variables(self):
        """Every variable the training loop reads or writes, in a fixed order."""
        return self._checkpointed_variables() + self._state["dropout_seeds"]

    # A while loop as written, and the step traced as written: AutoGraph's conversion of the
    # model, the loss and the optimizer lengthened a run's first step, and a newer AutoGraph
    # failed on this loop ("Unknown node type Expr").
    @tf.function(autograph=False)
    def _traced_train_loop(self, iterator, steps):
        def train_step(step, totals, _, diverged_at):
            number = self.optimizer.iterations + 1
            per_replica = self.strategy.run(self._train_step, args=(next(iterator),))
            summed = {key: total + self.strategy.reduce(SUM, per_replica[key], axis=None)
                      for key, total in totals.items()}
            # A non-finite loss leaves the sum non-finite. (Overflowing float16 gradients
            # with a finite loss are the loss scale's to skip.)
            first = tf.logical_and(tf.math.is_finite(totals["loss"]),
                                   tf.logical_not(tf.math.is_finite(summed["loss"])))
            return step + 1, summed, totals["loss"], tf.where(first, number, diverged_at)

        def going_on(step, _, loss_before_last_step, __):
            # The loss as of the step before the one just run: on a GPU, testing the last
            # step's would have the host wait for each step to finish before it queues the
            # next one.
            return tf.logical_and(step < steps, tf.math.is_finite(loss_before_last_step))

        totals = {key: tf.constant(0.0)
                  for key in dict.fromkeys(self.objective.METRICS + ("examples",))}
        _, totals, _, diverged_at = tf.while_loop(
            going_on, train_step,
            (tf.constant(0), totals, tf.constant(0.0), tf.constant(0, tf.int64)))
        return dict(totals, diverged_at=diverged_at)

    def train(self, dataset_fn, batch_size, output_dir, num_train_steps, iterations_per_loop,
              save_checkpoints_steps, keep_checkpoints=5):
        """Trains to `num_train_steps`, resuming from the newest intact checkpoint in
        `output_dir` (`checkpoint_dir`).

        Args:
          dataset_fn: callable(skip_batches) -> the global-batch training dataset, deterministic,
            starting after the batches already trained on.
          batch_size: its global batch size, which each checkpoint records: a run resumes only
            with the batch size it was started with.

        Returns:
          The global step reached.
        """
        chief = distribution.is_chief(self.strategy)
        # Every worker resumes from the chief's checkpoints, in output_dir: like the original's
        # model_dir, storage the whole cluster reads.
        paths = checkpoint_dir.on_disk(output_dir)
        agreed = checkpoint_dir.note_disagreement(output_dir, paths) if chief else True
        restored = self._restore_newest_intact(paths, partial=False)
        if restored:
            checkpoint_dir.check_batch_size(restored, batch_size)
            logging.info("Resumed from %s at step %d", restored, self.global_step)
        if distribution.has_several_workers(self.strategy):
            self._check_workers_resume_together(output_dir)
        if chief and (not agreed or restored != (paths[-1] if paths else None)):
            # The manager reads the state file: it must list what is on disk, up to the
            # checkpoint resumed from (a damaged newer one is written over when its step comes).
            checkpoint_dir.rewrite_state(output_dir, paths[:paths.index(restored) + 1]
                                         if restored else [])
        # Every worker takes part in saving (collectives); only the chief's files are kept.
        with distribution.write_dir(self.strategy, output_dir) as directory:
            saved = tf.train.Checkpoint(**self._state, **{
                checkpoint_dir.BATCH_SIZE: tf.Variable(batch_size, dtype=tf.int64)})
            manager = tf.train.CheckpointManager(
                saved, directory, max_to_keep=keep_checkpoints if chief else 1,
                checkpoint_name=checkpoint_dir.NAME)
            return self._train_from(dataset_fn, manager, output_dir, num_train_steps,
                                    iterations_per_loop, save_checkpoints_steps, chief)

    def _check_workers_resume_together(self, output_dir):
        """Raises ValueError unless every worker of the cluster restored the same step (a
        worker that cannot read output_dir would start afresh, and the collectives of the
        steps they then disagree on would fail or hang)."""
        @tf.function(autograph=False)
        def steps():
            return self.strategy.run(lambda: tf.distribute.get_replica_context().all_gather(
                tf.reshape(self.optimizer.iterations, [1]), axis=0))
        found = sorted(set(self.strategy.experimental_local_results(steps())[0].numpy()))
        if len(found) > 1:
            raise ValueError(
                f"The workers resume at different steps ({', '.join(map(str, found))}): every "
                f"worker must read the chief's checkpoints in --output_dir={output_dir}, storage "
                f"the whole cluster shares (this one resumes at step {self.global_step})")

    def _train_from(self, dataset_fn, manager, output_dir, num_train_steps, iterations_per_loop,
                    save_checkpoints_steps, chief):
        """`train` once the run has resumed; `manager` saves into this worker's write_dir."""
        step = self.global_step
        if step >= num_train_steps:
            return step
        iterator = distribution.per_replica_batches(self.strategy,
                                                    shard_by_data(dataset_fn(step)))
        summaries = os.path.join(output_dir, "train")
        writer = tf.summary.create_file_writer(summaries) if chief \
            else tf.summary.create_noop_writer()
        logging.info("Training steps %d to %d; summaries in %s (view them with: tensorboard "
                     "--logdir %s)", step + 1, num_train_steps, summaries, output_dir)
        progress = TrainingProgress(step, num_train_steps, self.progress_seconds)
        several_workers = distribution.has_several_workers(self.strategy)
        while step < num_train_steps:
            next_save = (step // save_checkpoints_steps + 1) * save_checkpoints_steps
            # The loops end where the original's do (iterations_per_loop, checkpoints); within
            # one, progress is reported on a time cadence of its own, but for workers of a
            # cluster: each would time its own steps, loops of different lengths would
            # interleave the step's all-reduce with the loop's, and the workers would deadlock.
            steps = min(iterations_per_loop, next_save - step, num_train_steps - step,
                        iterations_per_loop if several_workers
                        else progress.steps_until_report())
            start = time.time()
            totals = {k: float(v) for k, v in
                      self._train_loop(iterator, tf.constant(steps, tf.int32)).items()}
            if not math.isfinite(totals["loss"]):
                raise self._diverged(int(totals["diverged_at"]), f"the loss is {totals['loss']}",
                                     manager)
            elapsed = time.time() - start
            step = self.global_step
            scalars = dict(self.objective.loop_scalars(totals, steps),
                           learning_rate=self.optimizer.learning_rate_at(step - 1))
            scalars["examples_per_second"] = totals["examples"] / elapsed
            progress.done(steps, elapsed)
            logging.info("step %d/%d: %s, %s", step, num_train_steps,
                         ", ".join(f"{k} {v:.5g}" for k, v in scalars.items()),
                         progress.timing())
            with writer.as_default(step=step):
                for name, value in scalars.items():
                    tf.summary.scalar(name, value)
            if step % save_checkpoints_steps == 0 or step == num_train_steps:
                self._save(manager, step, scalars["loss"])
        writer.flush()
        return step

    def _save(self, manager, step, loss):
        """Saves checkpoint `ckpt-<step>`, unless a weight or an Adam slot is no longer finite:
        an update can overflow though its loss was finite (a huge learning rate's weight decay
        on embedding rows no loss reads), and a checkpoint is what a run publishes."""
        for variable in self._float_variables():
            # Variable by variable, eagerly: a run saves a few times, and tracing the check as
            # one function took longer than checking MiniLM's 318 variables ten times.
            if not bool(tf.reduce_all(tf.math.is_finite(variable))):
                raise self._diverged(
                    step, f"{variable.path} is no longer finite (the loss was {loss:.5g})",
                    manager)
        checkpoint_dir.save(manager, step, self._checkpointed_variables())

    def _float_variables(self):
        return [v for v in self.model.weights + self.optimizer.variables
                if keras.backend.is_float_dtype(v.dtype)]

    def _diverged(self, step, what, manager):
        """The ValueError that ends a diverging run at `step`: what went non-finite, the
        checkpoint it leaves newest, and the settings that make a run diverge."""
        schedule = self.optimizer.schedule
        newest = manager.latest_checkpoint
        kept = (f"{os.path.basename(newest)}, the newest checkpoint, is the last finite one"
                if newest else "no checkpoint was saved")
        return ValueError(
            f"step {step}: {what}: the run diverged; stopped before saving it ({kept}); "
            f"look at --learning_rate={schedule.init_lr:g}, the warm-up "
            f"(--warmup_proportion or --num_warmup_steps: {schedule.num_warmup_steps} of "
            f"{schedule.num_train_steps} steps) and --precision={self.model.dtype_policy.name}")

    def _checkpointed_variables(self):
        return (self.model.weights + self.optimizer.variables
                + ([self.loss_scale.scale, self.loss_scale.good_steps] if self.loss_scale else []))

    def restore_latest(self, output_dir):
        """Loads the latest intact checkpoint in `output_dir`, as the original's Estimator does
        before evaluating or predicting. Returns its path, or None if there is none."""
        paths = checkpoint_dir.on_disk(output_dir)
        checkpoint_dir.note_disagreement(output_dir, paths)
        latest = self._restore_newest_intact(paths, partial=True)
        if latest:
            logging.info("Loaded %s (step %d)", latest, self.global_step)
        return latest

    def _restore_newest_intact(self, paths, partial):
        """Restores the newest of `paths` (oldest first) that reads whole; a damaged one (a
        killed copy, a truncated or bit-flipped file) is passed over with a warning that names
        it. Returns the path restored, or None when there is none.

        Raises:
          ValueError: every checkpoint is damaged, naming them; or the newest readable one
            is of another model (another task or config), naming what differs.
        """
        damaged = []
        for path in reversed(paths):
            try:
                # (Not open_checkpoint: an index gone since the listing is damage, not a
                # missing input.)
                reader = name_based.CheckpointReader(path)
                with name_based.reading(reader.data):
                    different = checkpoint_dir.difference(self.checkpoint, path, partial)
                    if different:
                        raise ValueError(different)
                    status = (self.checkpoint.read if partial else self.checkpoint.restore)(path)
                if partial:
                    status.expect_partial()
                else:
                    status.assert_existing_objects_matched()
            except name_based.UnreadableCheckpoint as error:
                logging.warning("Checkpoint %s is damaged (%s); trying the one before it",
                                path, error)
                damaged.append(path)
                continue
            except (ValueError, AssertionError) as error:
                raise ValueError(
                    f"{path} is intact but belongs to another model than this run's (another "
                    f"task or config: {_difference(error)}); give this run another "
                    f"--output_dir, or the task and config that wrote it") from None
            return path
        if damaged:
            raise ValueError(f"every checkpoint is damaged ({', '.join(damaged)}); move them "
                             f"away to start afresh")
        return None

    def _predict_step_fn(self, batch, names):
        def part_step(batch):
            outputs = dict(batch, **self.model(batch, training=False))
            return {name: outputs[name] for name in names}

        def step(batch):
            parts = [part_step(part)
                     for part in micro_batches(batch, self.parallel_micro_batches)]
            return {name: tf.concat([part[name] for part in parts], 0) for name in names}
        per_replica = self.strategy.run(step, args=(batch,))
        return {name: self.strategy.gather(value, axis=0)
                for name, value in per_replica.items()}

    def predict(self, dataset, names, lengths=None, pad_value=0, what="predict", total=None):
        """Runs the model over `dataset` (global batches) and returns, for each name of a model
        output or an input feature, one numpy array over all examples, in input order.

        The dataset must carry an "example_index" feature [B]: replicas and workers see parts of
        each batch, and the gathered rows are put back in order by it. With dynamic padding
        (`input_pipeline.DynamicPadding`) each batch has its own sequence length t: an array
        [b, t, ...] named in `lengths` is padded at the end of axis 1 with `pad_value` to the
        length given (max_seq_length: then it comes out as with fixed padding); any other
        array whose shape varies between batches is padded with zeros to the largest.

        Args:
          lengths: dict, name -> the length of that array's axis 1 (at least every batch's).
          pad_value: what the arrays named in `lengths` are padded with.
          what, total: the pass's name and its number of examples (records), for the
            progress lines of a pass longer than `progress_seconds`.
        """
        names = tuple(dict.fromkeys(("example_index",) + tuple(names)))
        parts = {name: [] for name in names}
        progress = PassProgress(what, total, "examples", self.progress_seconds)
        for batch in distribution.per_replica_batches(self.strategy, shard_by_data(dataset)):
            for name, value in self._predict_step(batch, names).items():
                parts[name].append(value.numpy())
            progress.add(len(parts["example_index"][-1]))
        progress.finish()
        if not parts["example_index"]:
            return {name: np.zeros([0]) for name in names}
        lengths = lengths or {}
        arrays = {name: concatenate_padded(values, lengths[name], pad_value) if name in lengths
                  else concatenate_padded(values) for name, values in parts.items()}
        order = np.argsort(arrays["example_index"], kind="stable")
        return {name: value[order] for name, value in arrays.items()}

    @tf.function(autograph=False)
    def _metrics_step(self, batch):
        def step(batch):
            counts = self.objective.global_counts(batch)
            results = []
            for part in micro_batches(batch, self.parallel_micro_batches):
                loss, metrics = self.objective.replica_loss(
                    self.model(part, training=False), part, *counts)
                results.append(dict(metrics, loss=loss))
            return _summed_metrics(results)
        per_replica = self.strategy.run(step, args=(batch,))
        return {key: self.strategy.reduce(SUM, value, axis=None)
                for key, value in per_replica.items()}

    def metric_sums(self, dataset, max_batches, what="eval"):
        """The objective's METRICS over the first `max_batches` batches of `dataset` (global
        batches, in order), the model not training: each batch's loss is normalized by its own
        `global_counts`, as in a step.

        Returns:
          (dict: each METRIC summed over the batches (float), the number of batches read).
        """
        totals, batches = {}, 0
        progress = PassProgress(what, max_batches, "batches", self.progress_seconds)
        for batch in distribution.per_replica_batches(self.strategy, shard_by_data(dataset)):
            if batches >= max_batches:
                break
            for key, value in self._metrics_step(batch).items():
                totals[key] = totals.get(key, 0.0) + float(value)
            batches += 1
            progress.add(1)
        progress.finish()
        return totals, batches

    def export_original(self, path):
        """Writes the model, its Adam slots and `global_step` in the original name-based format,
        as the original's `model.ckpt-N` files, for the original tools and the other scripts."""
        slots = {}
        for variable, m, v in zip(self.trained_variables, self.optimizer.adam_m,
                                  self.optimizer.adam_v):
            name = name_based.checkpoint_name(variable)
            slots[f"{name}/adam_m"] = m
            slots[f"{name}/adam_v"] = v
        name_based.save_original(self.model, path, global_step=self.global_step,
                                 extra_tensors=slots)


def micro_batches(batch, parts):
    """`batch` (a dict of tensors, rows first) cut into `parts` consecutive parts of equal
    rows, the last shorter (or empty) where the rows do not divide."""
    if parts == 1:
        return [batch]
    rows = tf.shape(next(iter(batch.values())))[0]
    size = (rows + parts - 1) // parts
    return [_rows(batch, index * size, (index + 1) * size) for index in range(parts)]


def _rows(batch, start, end):
    """Rows [start, end) of every tensor of `batch`."""
    return {name: value[start:end] for name, value in batch.items()}


def _summed(gradients):
    """One variable's gradients from several micro-batches, summed; a gather's (`IndexedSlices`,
    which tf.add_n would make dense one by one) by concatenating their rows."""
    if len(gradients) == 1:
        return gradients[0]
    if isinstance(gradients[0], tf.IndexedSlices):
        return tf.IndexedSlices(tf.concat([g.values for g in gradients], 0),
                                tf.concat([g.indices for g in gradients], 0),
                                gradients[0].dense_shape)
    return tf.add_n(gradients)


def _dense_or_rows(gradient, variable, rows):
    """`gradient` dense, or with `rows`, a gather's gradient of a variable of at least
    ROWS_MIN_ELEMENTS as `summed_rows` (the optimizer's `updates_rows`)."""
    if (rows and isinstance(gradient, tf.IndexedSlices)
            and tf.TensorShape(variable.shape).num_elements() >= ROWS_MIN_ELEMENTS):
        return summed_rows(gradient)
    return tf.convert_to_tensor(gradient)


def summed_rows(gradient):
    """A gather's gradient (`IndexedSlices`, a row per lookup) with each index once, its rows
    summed in the order the dense gradient sums them (so to the same values)."""
    indices, positions = tf.unique(gradient.indices)
    values = tf.math.unsorted_segment_sum(gradient.values, positions, tf.shape(indices)[0])
    return tf.IndexedSlices(values, indices, gradient.dense_shape)


def _divided(gradient, divisor):
    if isinstance(gradient, tf.IndexedSlices):
        return tf.IndexedSlices(gradient.values / divisor, gradient.indices, gradient.dense_shape)
    return gradient / divisor


def _summed_metrics(results):
    """The metrics of several micro-batches (dicts of scalars), summed key by key."""
    if len(results) == 1:
        return results[0]
    return {key: tf.add_n([result[key] for result in results]) for key in results[0]}


def concatenate_padded(arrays, length=None, pad_value=0):
    """Concatenates numpy arrays on axis 0, first padding each with `pad_value` at the end of
    every other axis to the largest size among them, and axis 1 to `length` if given.

    Raises:
      ValueError: an array is longer on axis 1 than `length`.
    """
    shape = np.max([a.shape for a in arrays], axis=0)
    if length is not None:
        if shape[1] > length:
            raise ValueError(f"arrays of length {shape[1]} on axis 1 cannot be padded to {length}")
        shape[1] = length
    return np.concatenate([
        np.pad(a, [(0, 0)] + [(0, size - dim) for size, dim in zip(shape[1:], a.shape[1:])],
               constant_values=pad_value)
        for a in arrays])


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


def shard_by_data(dataset):
    """Each global batch is split across all replicas of all workers, so a step on N workers
    sees the examples one device would. (Sharding by file would give each worker other
    records, and fails outright with fewer files than workers.)"""
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return dataset.with_options(options)


def set_precision(name):
    """'float32', 'mixed_bfloat16' or 'mixed_float16' (then with dynamic loss scaling) for
    every model built afterwards."""
    keras.mixed_precision.set_dtype_policy(name)


def _difference(error):
    """What a checkpoint of another model differs in, from the error restoring it."""
    text = name_based.first_line(error)
    shapes = re.fullmatch(r"Received incompatible tensor with shape (\(.*?\)) when attempting "
                          r"to restore variable with shape (\(.*?\)) and name (.+?)(:\d+)?\.",
                          text)
    if shapes:
        return f"{shapes.group(3)} is {shapes.group(1)} there, {shapes.group(2)} here"
    return text


def error_reason(error):
    """The one line of a TensorFlow error that says what is wrong: a failed assertion's own
    message, else the first line past the "Graph execution error" and traceback lines."""
    text = getattr(error, "message", None) or str(error)
    assertion = re.search(r"assertion failed: \[([^\]]*)\]", text)
    if assertion:
        return assertion.group(1)
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("Graph execution error", "Detected at node", "File ",
                                         "[[")):
            return line[:300]
    return type(error).__name__
