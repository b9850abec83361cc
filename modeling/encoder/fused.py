"""A training step's element-wise work, compiled by XLA into one pass over memory each.

TensorFlow runs a formula's operations one by one, each a pass over the whole tensor; under
mixed_bfloat16 each also converts every element to float32 and back, and bfloat16's Erfc is
not vectorized. Where bfloat16 matmuls are fast (AMX), a training step can spend more time in
its GELUs and their derivatives (a dozen operations over [rows, I] each) than in the
feed-forward matmuls, and much of the rest in LayerNorm (benchmarks/history/finetuning.md).
XLA fuses such a formula into one loop that reads its inputs once. Matmuls stay TensorFlow's
(oneDNN's), which XLA's CPU backend runs far slower in bfloat16.

XLA compiles each input shape anew, and a training step's row count changes from batch to
batch (`token_rows.RealTokens`: the batch's real tokens). So the rows are padded to a multiple
of `ROW_MULTIPLE` first: a run compiles each function once for each multiple its batches reach
(about a dozen for MRPC's batches), for at most ROW_MULTIPLE - 1 rows of extra work a call.

Only training uses these forms, on the token rows (not on the last layer's few rows at a
head's positions, `TransformerLayer.call`); inference keeps the original's operations and
numbers.
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
        # Built once for every pad and cut of a rank: a list with a tensor in it is packed anew
        # at each use, and a training step pads and cuts a hundred times.
        self._paddings, self._slices = {}, {}

    def pad(self, tensor):
        rank = tensor.shape.rank
        if rank not in self._paddings:
            self._paddings[rank] = tf.convert_to_tensor(
                [[0, self.padding]] + [[0, 0]] * (rank - 1))
        return tf.pad(tensor, self._paddings[rank])

    def cut(self, tensor):
        rank = tensor.shape.rank
        if rank not in self._slices:
            self._slices[rank] = (tf.zeros([rank], tf.int32),
                                  tf.convert_to_tensor([self.rows] + [-1] * (rank - 1)))
        cut = tf.slice(tensor, *self._slices[rank])
        cut.set_shape([None] + tensor.shape[1:])  # a computed size hides the columns' sizes
        return cut


def column_sums(rows):
    """float32 [u]: the sums over the rows of a padded [n, u] Tensor, inside a compiled pass.

    Summed as [n / ROW_MULTIPLE, ROW_MULTIPLE, u] over both leading axes: XLA vectorizes that
    form along u, where the plain sum over axis 0 took as long as the rest of the pass.
    """
    width = rows.shape[-1]
    return tf.reduce_sum(tf.reshape(tf.cast(rows, tf.float32), [-1, ROW_MULTIPLE, width]), [0, 1])


def widened(tensor):
    """bfloat16 and float16 as float32, in which a compiled pass computes (XLA's bfloat16
    arithmetic converts each operation's result back; one conversion at each end is faster)."""
    return tf.cast(tensor, tf.float32) if tensor.dtype.size < 4 else tensor


def activation_with_bias(function, derivative):
    """`function(x + bias)` (element-wise, after a matmul) for training, compiled; its forward
    pass computes `derivative(z)`, function'(z), beside the value, and keeps that (in x's dtype)
    for the backward pass, which only multiplies it by the upstream gradient.

    One pass computes z's erf (or tanh) for both, where a backward pass of its own computed it
    again, and took as long as the forward one. Differentiating the formula would keep three
    [rows, I] temporaries instead of one. The bias is added here too, so that its gradient, the
    sum over rows of z's, is summed in the backward pass, not by TensorFlow's BiasAddGrad, a
    bfloat16 reduction it does not vectorize (benchmarks/history/finetuning.md).

    The result takes x [n, u] and bias [u] of x's dtype.
    """
    def forward_fn(x, bias):
        z = widened(x) + widened(bias)
        return tf.cast(function(z), x.dtype), tf.cast(derivative(z), x.dtype)

    def backward_fn(factor, upstream):
        gradient = widened(upstream) * widened(factor)
        return tf.cast(gradient, upstream.dtype), column_sums(gradient)

    forward, backward = compiled(forward_fn), compiled(backward_fn)
    name = function.__name__  # the passes' name scope: a profile tells them apart

    @tf.custom_gradient
    def function_for_training(x, bias):
        with tf.name_scope(name):
            rows = PaddedRows(x)
            output, factor = forward(rows.pad(x), bias)

        def gradient(upstream):
            with tf.name_scope(f"{name}_gradient"):
                x_gradient, bias_gradient = backward(factor, rows.pad(upstream))
                return rows.cut(x_gradient), tf.cast(bias_gradient, bias.dtype)
        return rows.cut(output), gradient
    return function_for_training


def dropout_add_layer_norm(x, bias, residual, keep, scale, gamma, beta, epsilon):
    """LayerNorm(dropout(x + bias) + residual) with the dropout's mask given, in two compiled
    passes (forward, backward) where TensorFlow would take about thirty.

    The sum is formed and normalized in float32 (Keras' LayerNormalization forms a bfloat16
    sum, then normalizes it in float32). The forward pass keeps the normalized sum (in x's
    dtype) and 1/std for the backward pass, which so reads no statistics again. The bias's
    gradient, like gamma's and beta's, is summed over rows in the backward pass (see
    `activation_with_bias`).

    Args:
      x, residual: float Tensors [n, H] of the compute dtype.
      bias: float Tensor [H] of x's dtype.
      keep: bool Tensor [n, H], where dropout keeps x; None keeps all of it.
      scale: float, what the kept values are multiplied by.
      gamma, beta: float32 Tensors [H].
      epsilon: float, added to the variance.

    Returns:
      float Tensor [n, H] of x's dtype.
    """
    if keep is None:
        keep, scale = tf.ones_like(x, tf.bool), 1.0
    return _dropout_add_layer_norm(float(scale), float(epsilon))(x, bias, residual, keep, gamma,
                                                                 beta)


@functools.lru_cache(maxsize=None)
def _dropout_add_layer_norm(scale, epsilon):
    """The custom-gradient function for one scale and epsilon, shared by every layer."""

    def forward_fn(x, bias, residual, keep, gamma, beta):
        total = tf.where(keep, (widened(x) + widened(bias)) * scale, 0.0) + widened(residual)
        mean = tf.reduce_mean(total, axis=-1, keepdims=True)
        centered = total - mean
        inverse = tf.math.rsqrt(tf.reduce_mean(tf.square(centered), axis=-1, keepdims=True)
                                + epsilon)  # 1/std [n, 1]
        normalized = centered * inverse
        return tf.cast(normalized * gamma + beta, x.dtype), tf.cast(normalized, x.dtype), inverse

    def backward_fn(upstream, normalized, inverse, keep, gamma):
        upstream32, normalized = widened(upstream), widened(normalized)
        scaled = upstream32 * gamma
        total_gradient = inverse * (
            scaled - tf.reduce_mean(scaled, axis=-1, keepdims=True)
            - normalized * tf.reduce_mean(scaled * normalized, axis=-1, keepdims=True))
        x_gradient = tf.where(keep, total_gradient * scale, 0.0)
        return (tf.cast(x_gradient, upstream.dtype), column_sums(x_gradient),
                tf.cast(total_gradient, upstream.dtype), column_sums(upstream32 * normalized),
                column_sums(upstream32))

    forward, backward = compiled(forward_fn), compiled(backward_fn)

    @tf.custom_gradient
    def function(x, bias, residual, keep, gamma, beta):
        with tf.name_scope("dropout_add_layer_norm"):
            rows = PaddedRows(x)
            keep = rows.pad(keep)
            output, normalized, inverse = forward(rows.pad(x), bias, rows.pad(residual), keep,
                                                  gamma, beta)

        def gradient(upstream):
            with tf.name_scope("dropout_add_layer_norm_gradient"):
                x_gradient, bias_gradient, residual_gradient, gamma_gradient, beta_gradient = (
                    backward(rows.pad(upstream), normalized, inverse, keep, gamma))
                return (rows.cut(x_gradient), tf.cast(bias_gradient, bias.dtype),
                        rows.cut(residual_gradient), None, gamma_gradient, beta_gradient)
        return rows.cut(output), gradient
    return function
