"""The original optimizer: Adam with weight decay inside the update, no bias correction, and a
linear warm-up then linear decay computed from step 0.

Numbers that differ from Keras' AdamW: epsilon 1e-6, no bias correction, weight decay added to
the Adam update before the learning rate multiplies it, and the exclusion of
`LayerNorm|layer_norm|bias` matched against the full variable path (Keras matches leaf names).
"""
import re

import keras
import tensorflow as tf

from modeling import internals

EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")
CLIP_NORM = 1.0
ROW_MULTIPLE = 256  # a gather's rows are updated in passes compiled for multiples of this


@keras.saving.register_keras_serializable(package="bert")
class WarmupPolynomialDecay(keras.optimizers.schedules.LearningRateSchedule):
    """lr(step) = init_lr·step/warmup while step < warmup, else init_lr·(1 - step/total).

    The decay runs from step 0, not from the end of the warm-up, as in the original; each term
    is computed in float32 in the original's order of operations.
    """

    def __init__(self, init_lr, num_train_steps, num_warmup_steps):
        if num_train_steps <= 0:
            raise ValueError(f"num_train_steps must be positive, got {num_train_steps}")
        if num_warmup_steps < 0:
            raise ValueError(f"num_warmup_steps must be >= 0, got {num_warmup_steps}")
        self.init_lr = init_lr
        self.num_train_steps = num_train_steps
        self.num_warmup_steps = num_warmup_steps

    def __call__(self, step):
        step = tf.cast(step, tf.int64)
        init_lr = tf.constant(self.init_lr, tf.float32)
        decay_steps = tf.constant(self.num_train_steps, tf.float32)
        progress = tf.minimum(tf.cast(step, tf.float32), decay_steps) / decay_steps
        learning_rate = (init_lr - 0.0) * tf.pow(1.0 - progress, 1.0) + 0.0
        if self.num_warmup_steps:
            warmup_steps = tf.constant(self.num_warmup_steps, tf.float32)
            warmup_learning_rate = init_lr * (tf.cast(step, tf.float32) / warmup_steps)
            is_warmup = tf.cast(step < self.num_warmup_steps, tf.float32)
            learning_rate = (1.0 - is_warmup) * learning_rate + is_warmup * warmup_learning_rate
        return learning_rate

    def get_config(self):
        return {"init_lr": self.init_lr, "num_train_steps": self.num_train_steps,
                "num_warmup_steps": self.num_warmup_steps}


@keras.saving.register_keras_serializable(package="bert")
class AdamWeightDecay(keras.optimizers.Optimizer):
    """The original `AdamWeightDecayOptimizer`, as a Keras 3 optimizer.

    For each variable: m = β1·m + (1-β1)·g; v = β2·v + (1-β2)·g²;
    update = m / (√v + ε) (+ weight_decay_rate·w unless excluded); w -= lr·update.

    Under a `tf.distribute` strategy, `apply_gradients` takes gradients already summed over
    replicas (and clipped, as the original clips the global gradient): see
    `modeling.training.trainer`. Keras would sum them once more; this optimizer does not.

    Each variable is updated by a compiled call of its own, and inside a compiled step each
    call waits for the previous one's assignments (in each of `update_chains` chains, which
    share the variables by size: the trainer sets one per parallel micro-batch, one for each
    inter-op thread). Left free, TF's executor evaluates many
    variables' element-wise temporaries at once, which raises a training step's peak memory
    without making the update faster (benchmarks/history/adam_update.md). The calls share
    their traces (after the first shape, one that leaves the shape open; XLA compiles each
    shape). Updating the small variables (biases, LayerNorm) together in one call instead
    traced each one's formula: 1.3 s more of a run's first step, for a step 1.01x faster on
    TF 2.21 and no faster on tf-nightly (benchmarks/history/speedups.md).

    A gather's gradient (a vocabulary's embeddings') may come as the rows it looked up
    (`IndexedSlices`, each index once): the other rows take the formula for a zero gradient,
    and no dense gradient is formed (`_assign_new_rows`).
    """

    updates_rows = True  # see above; the trainer hands such gradients over where this is set

    def __init__(self, learning_rate, weight_decay_rate=0.01, beta_1=0.9, beta_2=0.999,
                 epsilon=1e-6, exclude_from_weight_decay=EXCLUDE_FROM_WEIGHT_DECAY,
                 name="adam_weight_decay", **kwargs):
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        self.schedule = learning_rate  # a schedule, or a float
        self.weight_decay_rate = weight_decay_rate
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.exclude_from_weight_decay = tuple(exclude_from_weight_decay or ())
        # What `apply_scaled_gradients` hands the update passes for one call.
        self._gradient_scale = None
        self._apply_condition = None
        self.update_chains = 1
        self._chains = []  # per chain: [its last assignments, the elements it updates]
        self._step_scalars = {}
        # The last trace's compiled update calls, (call op, shape, dtype) each, which
        # `compile_ahead` compiles beside the first call of a newly traced loop.
        self.compiled_updates = []

    def apply_scaled_gradients(self, grads_and_vars, scale=None, condition=None):
        """`apply_gradients`, with every gradient multiplied by `scale` inside the update's own
        pass (global-norm clipping's factor, `clip_scale`), and no change at all where
        `condition` is False.

        Args:
          grads_and_vars: (gradient, variable) pairs, as `apply_gradients` takes them.
          scale: a float32 scalar, or None for 1.
          condition: a bool scalar Tensor (e.g. "the loss-scaled gradients are finite"), or
            None: where False, every variable and slot keeps its value (the step count still
            moves; the caller puts it back).
        """
        self._gradient_scale, self._apply_condition = scale, condition
        try:
            return self.apply_gradients(grads_and_vars)
        finally:
            self._gradient_scale = self._apply_condition = None

    def learning_rate_at(self, step):
        """The learning rate step `step` (0-based) applies: what a log of that step shows."""
        schedule = self.schedule
        return float(schedule(step) if callable(schedule) else schedule)

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self.adam_m = [self.add_variable_from_reference(v, "adam_m") for v in var_list]
        self.adam_v = [self.add_variable_from_reference(v, "adam_v") for v in var_list]
        # Decided here, on Keras paths: update_step may see the backend's raw variables.
        self.decays = [self.uses_weight_decay(v) for v in var_list]

    def uses_weight_decay(self, variable):
        """Decay unless a pattern matches the variable's full path, as the original does."""
        if not self.weight_decay_rate:
            return False
        path = variable.path
        return not any(re.search(pattern, path) for pattern in self.exclude_from_weight_decay)

    def update_step(self, gradient, variable, learning_rate):
        """Updates `variable` and its slots by one compiled call that assigns them in place,
        after the previous call of the chain that has the fewest elements to update."""
        chain = min(self._chains, key=lambda chain: chain[1])
        with tf.control_dependencies(chain[0]):
            index = internals.variable_index(self, variable)
            learning_rate, step, scale = self._scalars_for(variable, learning_rate)
            arguments = (variable, _beside(self.adam_m[index], variable),
                         _beside(self.adam_v[index], variable))
            settings = (learning_rate, step, self.decays[index], scale, self._apply_condition)
            if isinstance(gradient, tf.IndexedSlices) and self.updates_rows:
                compiled, done = self._assign_new_rows(*arguments, gradient, *settings)
            else:  # dense, as the original's
                done = self._assign_new_values(*arguments, tf.convert_to_tensor(gradient),
                                               *settings)
                compiled = [done]
        chain[0] = [done]
        chain[1] += tf.TensorShape(variable.shape).num_elements()
        if not tf.executing_eagerly():
            self.compiled_updates.extend(
                (call.op, tf.TensorShape(variable.shape), tf.as_dtype(variable.dtype))
                for call in compiled)

    def _scalars_for(self, variable, learning_rate):
        """(learning rate, step counted from 1, gradient scale) in the variable's dtype, made
        once an update for each dtype and device: a hundred variables' own casts were a tenth
        of the update's graph, traced anew in every run."""
        key = (variable.dtype, variable.device)
        if key not in self._step_scalars:
            scale = 1.0 if self._gradient_scale is None else self._gradient_scale
            self._step_scalars[key] = tuple(tf.cast(value, variable.dtype) for value in (
                learning_rate, self.iterations + 1, scale))
        return self._step_scalars[key]

    def _distributed_tf_update_step(self, distribution, grads_and_vars, learning_rate):
        for gradient, variable in grads_and_vars:
            distribution.extended.update(variable, self._update_step_of,
                                         args=(gradient, learning_rate), group=False)

    def _update_step_of(self, variable, gradient, learning_rate):
        return self.update_step(gradient, variable, learning_rate)

    # Compiled, the formula's dozen element-wise operations become passes over memory that
    # write only the results, and write them into the variables' own buffers (XLA aliases a
    # variable it assigns). Returning the values instead, to be assigned after the call, gave
    # every result a new buffer at every step, and a slower training step
    # (benchmarks/bench_adam_update.py). XLA contracts a·b + c into fused multiply-adds, which
    # round once where the separate operations rounded twice.
    @tf.function(jit_compile=True, reduce_retracing=True, autograph=False)
    def _assign_new_values(self, weights, m, v, gradient, learning_rate, step, decays, scale,
                           condition):
        """Assigns the variable `weights` and its slots `m` and `v` their new values; where
        `condition` (a bool tensor a training step may set, e.g. "the loss-scaled gradients
        are finite") is False, all three keep their values, so a skipped step changes neither
        weights nor slots."""
        old = [variable.read_value() for variable in (weights, m, v)]
        new = self._new_values(*old, gradient, learning_rate, step, decays, scale)
        for variable, value, previous in zip((weights, m, v), new, old):
            variable.assign(_where(condition, value, previous))
        return step

    def _assign_new_rows(self, weights, m, v, rows, learning_rate, step, decays, scale,
                         condition):
        """`_assign_new_values` for a gradient that is zero but in `rows` (`IndexedSlices` with
        each index once, `trainer.summed_rows`), without that dense gradient: every element
        is updated as for a zero gradient, reading none, then the rows are computed from
        their values before that and written over it.

        The zero gradient's update is two compiled passes, the moments and then the weights
        from them: compiled as one, XLA recomputes the cheap moments inside the weights' loop
        and so copies both slots first, which took a MiniLM vocabulary 34 ms against 14
        (one core). The rows are read from the variables' values and written inside a
        compiled pass: TensorFlow's own sparse reads and writes of a variable (ResourceGather,
        ResourceScatterUpdate) turn it to copy-on-read, after which every read of the whole
        variable (the forward pass's) copies it. Their count is padded to a multiple of
        ROW_MULTIPLE with copies of the first row (written twice, with the same values), so
        that XLA compiles that pass for a few counts, not for every step's.

        Returns:
          ([the compiled calls' outputs], a tensor that is ready once the rows are written).
        """
        count = tf.shape(rows.indices)[0]
        taken = tf.concat([tf.range(count), tf.zeros([-count % ROW_MULTIPLE], tf.int32)], 0)
        indices = tf.gather(rows.indices, taken)
        old = [tf.gather(variable.read_value(), indices) for variable in (weights, m, v)]
        with tf.control_dependencies(old):
            moments = self._assign_moments(m, v, tf.zeros([], rows.values.dtype), scale,
                                           condition)
        with tf.control_dependencies([moments]):
            updated = self._assign_weights(weights, m, v, learning_rate, step, decays,
                                           condition)
        with tf.control_dependencies([updated]):
            written = self._assign_rows(weights, m, v, indices, *old,
                                        tf.gather(rows.values, taken), learning_rate, step,
                                        decays, scale, condition)
        return [moments, updated], written

    @tf.function(jit_compile=True, reduce_retracing=True, autograph=False)
    def _assign_moments(self, m, v, gradient, scale, condition):
        """Assigns the slots `m` and `v` their new values (where `condition`)."""
        old = [m.read_value(), v.read_value()]
        for variable, value, previous in zip((m, v), self._new_moments(*old, gradient, scale),
                                             old):
            variable.assign(_where(condition, value, previous))
        return scale

    @tf.function(jit_compile=True, reduce_retracing=True, autograph=False)
    def _assign_weights(self, weights, next_m, next_v, learning_rate, step, decays, condition):
        """Assigns `weights` their new values from the slots' new ones (where `condition`)."""
        old = weights.read_value()
        new = self._new_weights(old, next_m.read_value(), next_v.read_value(), learning_rate,
                                step, decays)
        weights.assign(_where(condition, new, old))
        return step

    @tf.function(jit_compile=True, reduce_retracing=True, autograph=False)
    def _assign_rows(self, weights, m, v, indices, old_weights, old_m, old_v, gradient,
                     learning_rate, step, decays, scale, condition):
        """Writes the rows `indices` [r] of `weights`, `m` and `v` from their values before
        the step (`old_*` [r, ...]) and their gradient [r, ...]."""
        old = (old_weights, old_m, old_v)
        new = self._new_values(*old, gradient, learning_rate, step, decays, scale)
        for variable, value, previous in zip((weights, m, v), new, old):
            variable.assign(tf.tensor_scatter_nd_update(
                variable.read_value(), indices[:, tf.newaxis], _where(condition, value, previous)))
        return step

    def _new_values(self, weights, m, v, gradient, learning_rate, step, decays, scale):
        """A variable's new weights, m and v, from its gradient times `scale` (the global-norm
        clipping's factor, applied here rather than in a pass of its own)."""
        next_m, next_v = self._new_moments(m, v, gradient, scale)
        return (self._new_weights(weights, next_m, next_v, learning_rate, step, decays),
                next_m, next_v)

    def _new_moments(self, m, v, gradient, scale):
        gradient = gradient * scale
        return (self.beta_1 * m + (1.0 - self.beta_1) * gradient,
                self.beta_2 * v + (1.0 - self.beta_2) * tf.square(gradient))

    def _new_weights(self, weights, next_m, next_v, learning_rate, step, decays):
        return weights - learning_rate * self.direction(next_m, next_v, weights, decays, step)

    def direction(self, next_m, next_v, weights, decays, step):
        """The step's update before the learning rate, from the new moments; `step` counts
        from 1."""
        update = next_m / (tf.sqrt(next_v) + self.epsilon)
        if decays:
            update += self.weight_decay_rate * weights
        return update

    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        # Tensors of another trace must not leak into this one.
        self._chains, self._step_scalars = [[[], 0] for _ in range(self.update_chains)], {}
        self.compiled_updates = []
        try:
            super()._backend_update_step(grads, trainable_variables, learning_rate)
        finally:
            self._chains, self._step_scalars = [], {}

    def _all_reduce_sum_gradients(self, grads_and_vars):
        return list(grads_and_vars)  # summed and clipped by the caller

    def get_config(self):
        config = super().get_config()
        config.update(weight_decay_rate=self.weight_decay_rate, beta_1=self.beta_1,
                      beta_2=self.beta_2, epsilon=self.epsilon,
                      exclude_from_weight_decay=list(self.exclude_from_weight_decay))
        return config


@keras.saving.register_keras_serializable(package="bert")
class Lamb(AdamWeightDecay):
    """LAMB (You et al., 2019), for large batches: Adam with bias correction, weight decay,
    and each variable's step scaled by the trust ratio ‖w‖ / ‖update‖.

    Variables excluded from weight decay (LayerNorm, biases) also skip the trust ratio.
    """

    # Its trust ratio takes norms over every element's update, rows included.
    updates_rows = False

    def __init__(self, learning_rate, name="lamb", **kwargs):
        super().__init__(learning_rate, name=name, **kwargs)

    def direction(self, next_m, next_v, weights, decays, step):
        m_hat = next_m / (1.0 - tf.pow(tf.cast(self.beta_1, weights.dtype), step))
        v_hat = next_v / (1.0 - tf.pow(tf.cast(self.beta_2, weights.dtype), step))
        update = m_hat / (tf.sqrt(v_hat) + self.epsilon)
        if decays:
            update += self.weight_decay_rate * weights
            # Summed as tf.norm sums, written out: the update's trace may leave the rank
            # open, which tf-nightly's tf.norm cannot take.
            weight_norm, update_norm = (tf.sqrt(tf.reduce_sum(tf.square(x)))
                                        for x in (weights, update))
            ratio = tf.where(weight_norm > 0.0,
                             tf.where(update_norm > 0.0, weight_norm / update_norm, 1.0), 1.0)
            update *= ratio
        return update


OPTIMIZERS = {"adamw": AdamWeightDecay, "lamb": Lamb}


def create_optimizer(init_lr, num_train_steps, num_warmup_steps, optimizer="adamw"):
    """The original `create_optimizer`'s optimizer and schedule. Clip with `clip_gradients`,
    or hand the update `clip_scale`'s factor by `apply_scaled_gradients`, as the trainer does.

    Args:
      optimizer: "adamw", the original's AdamWeightDecay, or "lamb".
    """
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"Unknown optimizer {optimizer!r}; expected one of {sorted(OPTIMIZERS)}")
    schedule = WarmupPolynomialDecay(init_lr, num_train_steps, num_warmup_steps)
    return OPTIMIZERS[optimizer](schedule)


def clip_scale(gradients):
    """What global-norm clipping at 1.0 multiplies every gradient by, computed as
    `tf.clip_by_global_norm` computes it (NaN where the norm is not finite).

    Given to `AdamWeightDecay.apply_scaled_gradients`, each variable's update applies it in the pass
    that reads the gradient anyway, instead of a pass of its own that reads and writes every
    gradient once more.

    Args:
      gradients: list of dense float32 Tensors, or `IndexedSlices` with each index once
        (`trainer.summed_rows`: the norm of their values is the dense gradient's); None
        entries are skipped.

    Returns:
      (scale, global norm before clipping): float32 scalars.
    """
    norm = tf.linalg.global_norm(gradients)  # skips the None entries
    scale = CLIP_NORM * tf.minimum(1.0 / norm, 1.0 / CLIP_NORM)
    return scale + (norm - norm), norm


def clip_gradients(gradients):
    """Global-norm clipping at 1.0, as the original applies before the update.

    Gathers give `IndexedSlices` gradients with a row per lookup; their norm is not the norm
    of the summed gradient (the original's one-hot embedding matmuls give dense ones), so they
    are made dense first.

    Returns:
      (clipped dense gradients, the global norm before clipping).
    """
    dense = [None if g is None else tf.convert_to_tensor(g) for g in gradients]
    scale, norm = clip_scale(dense)
    return [None if g is None else g * scale for g in dense], norm


def _where(condition, value, previous):
    """`value` where `condition` (a bool scalar Tensor, or None: everywhere), else `previous`."""
    return value if condition is None else tf.where(condition, value, previous)


def _beside(slot, variable):
    """The backend variable of `slot` on `variable`'s device: a mirrored variable's component
    there (the update runs once per replica, each on its own copies)."""
    slot = slot.value if isinstance(slot, keras.Variable) else slot
    components = getattr(slot, "values", None)
    if components is None:
        return slot
    return next(component for component in components if component.device == variable.device)

