"""A training step's element-wise work, compiled by XLA into one pass over memory each.

TensorFlow runs a formula's operations one by one, each a pass over the whole tensor; under
mixed_bfloat16 each also converts every element to float32 and back, and bfloat16's Erfc is
not vectorized. On a CPU whose bfloat16 matmuls run on AMX, a MiniLM training step spent more
time in its GELUs and their derivatives (a dozen operations over [rows, I] each) than in the
feed-forward matmuls, and another tenth in LayerNorm (benchmarks/README.md). XLA fuses such a
formula into one loop that reads its inputs once. Matmuls stay TensorFlow's (oneDNN's), which
XLA's CPU backend runs at a quarter of their speed in bfloat16.

XLA compiles each input shape anew, and a training step's row count changes from batch to
batch (`token_rows.RealTokens`: the batch's real tokens). So the rows are padded to a multiple
of `ROW_MULTIPLE` first: a run compiles each function once for each multiple its batches reach
(MRPC's 640 to 3300 rows make 11), for at most ROW_MULTIPLE - 1 rows of extra work a call.

Only training uses these forms; inference keeps the original's operations and numbers.
"""
import functools

import tensorflow as tf

ROW_MULTIPLE = 256


def compiled(function):
    """`function` compiled by XLA (once per shape of its arguments)."""
    return tf.function(function, jit_compile=True, autograph=False)


class PaddedRows:
    """Pads tensors [n, ...] with zero rows to a multiple of ROW_MULTIPLE, and cuts them back.

    A compiled function on padded rows must compute row by row: a padding row may reach the
    others only through sums over rows, to which zero rows add nothing. What the backward pass
    reads is kept padded, so that it is padded once.
    """

    def __init__(self, like):
        """Args: like: a Tensor [n, ...] of the row count to pad."""
        self.rows = tf.shape(like)[0]
        self.padding = -self.rows % ROW_MULTIPLE

    def pad(self, tensor):
        return tf.pad(tensor, [[0, self.padding]] + [[0, 0]] * (tensor.shape.rank - 1))

    def cut(self, tensor):
        return tensor[:self.rows]


def keeping_only_the_input(function, derivative):
    """`function` (element-wise) whose backward pass keeps only its input x, both passes
    compiled; `derivative(x, upstream)` is upstream * function'(x).

    Differentiating the formula keeps its intermediate [rows, I] tensors for the backward pass
    instead, three of them: about 50 MB a layer at MiniLM's batch 32 x 128, 311 MB of a
    training step's peak memory (benchmarks/README.md).
    """
    forward, backward = compiled(function), compiled(derivative)
    name = function.__name__  # the passes' name scope: a profile tells them apart

    @tf.custom_gradient
    def function_for_training(x):
        with tf.name_scope(name):
            rows = PaddedRows(x)
            padded = rows.pad(x)
            output = rows.cut(forward(padded))

        def gradient(upstream):
            with tf.name_scope(f"{name}_gradient"):
                return rows.cut(backward(padded, rows.pad(upstream)))
        return output, gradient
    return function_for_training


def dropout_add_layer_norm(x, residual, keep, scale, gamma, beta, epsilon):
    """LayerNorm(dropout(x) + residual) with the dropout's mask given, in two compiled passes
    (forward, backward) where TensorFlow would take about thirty.

    The sum is formed in x's dtype and normalized in float32, as Keras' LayerNormalization
    normalizes a bfloat16 input; the backward pass recomputes the statistics from the sum.

    Args:
      x, residual: float Tensors [n, H] of the compute dtype.
      keep: bool Tensor [n, H], where dropout keeps x; None keeps all of it.
      scale: float, what the kept values are multiplied by.
      gamma, beta: float32 Tensors [H].
      epsilon: float, added to the variance.

    Returns:
      float Tensor [n, H] of x's dtype.
    """
    if keep is None:
        keep, scale = tf.ones_like(x, tf.bool), 1.0
    return _dropout_add_layer_norm(float(scale), float(epsilon))(x, residual, keep, gamma, beta)


@functools.lru_cache(maxsize=None)
def _dropout_add_layer_norm(scale, epsilon):
    """The custom-gradient function for one scale and epsilon, shared by every layer."""

    def statistics(total):
        total = tf.cast(total, tf.float32)
        mean = tf.reduce_mean(total, axis=-1, keepdims=True)
        centered = total - mean
        inverse = tf.math.rsqrt(tf.reduce_mean(tf.square(centered), axis=-1, keepdims=True)
                                + epsilon)
        return centered * inverse, inverse  # normalized [n, H], 1/std [n, 1]

    def forward_fn(x, residual, keep, gamma, beta):
        total = tf.where(keep, x * tf.cast(scale, x.dtype), tf.zeros_like(x)) + residual
        normalized, _ = statistics(total)
        return tf.cast(normalized * gamma + beta, x.dtype), total

    def backward_fn(upstream, total, keep, gamma):
        normalized, inverse = statistics(total)
        upstream32 = tf.cast(upstream, tf.float32)
        gamma_gradient = tf.reduce_sum(upstream32 * normalized, axis=0)
        beta_gradient = tf.reduce_sum(upstream32, axis=0)
        scaled = upstream32 * gamma
        total_gradient = inverse * (
            scaled - tf.reduce_mean(scaled, axis=-1, keepdims=True)
            - normalized * tf.reduce_mean(scaled * normalized, axis=-1, keepdims=True))
        residual_gradient = tf.cast(total_gradient, upstream.dtype)
        x_gradient = tf.where(keep, residual_gradient * tf.cast(scale, upstream.dtype),
                              tf.zeros_like(residual_gradient))
        return x_gradient, residual_gradient, gamma_gradient, beta_gradient

    forward, backward = compiled(forward_fn), compiled(backward_fn)

    @tf.custom_gradient
    def function(x, residual, keep, gamma, beta):
        with tf.name_scope("dropout_add_layer_norm"):
            rows = PaddedRows(x)
            keep = rows.pad(keep)
            output, total = forward(rows.pad(x), rows.pad(residual), keep, gamma, beta)

        def gradient(upstream):
            with tf.name_scope("dropout_add_layer_norm_gradient"):
                x_gradient, residual_gradient, gamma_gradient, beta_gradient = backward(
                    rows.pad(upstream), total, keep, gamma)
                return (rows.cut(x_gradient), rows.cut(residual_gradient), None,
                        gamma_gradient, beta_gradient)
        return rows.cut(output), gradient
    return function
