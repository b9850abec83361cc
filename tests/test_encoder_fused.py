import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling.encoder import fused


@pytest.mark.parametrize("rows", [1, fused.ROW_MULTIPLE - 1, fused.ROW_MULTIPLE,
                                  fused.ROW_MULTIPLE + 1])
def test_padded_rows_round_trip_and_add_nothing_to_sums_over_rows(rows):
    x = np.random.default_rng(rows).normal(size=(rows, 5)).astype("float32")
    padding = fused.PaddedRows(tf.constant(x))
    padded = padding.pad(tf.constant(x))
    assert padded.shape[0] % fused.ROW_MULTIPLE == 0 and padded.shape[0] - rows < 256
    sums = fused.compiled(lambda t: tf.reduce_sum(t, axis=0))(padded)
    np.testing.assert_allclose(sums.numpy(), x.sum(axis=0), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(padding.cut(padded).numpy(), x)


def keras_layer_norm(gamma, beta, epsilon, dtype):
    norm = keras.layers.LayerNormalization(epsilon=epsilon, dtype=dtype)
    norm.build((None, gamma.shape[-1]))
    norm.gamma.assign(gamma)
    norm.beta.assign(beta)
    return norm


def reference(norm, x, bias, residual, keep, scale):
    """What the inference path computes: Keras' LayerNormalization of the dropped sum."""
    x = x + bias
    dropped = tf.where(keep, x * tf.cast(scale, x.dtype), tf.zeros_like(x))
    return norm(dropped + residual)


@pytest.mark.parametrize("dtype,tolerance", [("float32", 2e-5), ("bfloat16", 3e-2)])
def test_dropout_add_layer_norm_gives_keras_values_and_gradients(dtype, tolerance):
    rng = np.random.default_rng(7)
    rows, hidden = 300, 37
    x, residual = (tf.constant(rng.normal(size=(rows, hidden)), dtype) for _ in range(2))
    bias = tf.constant(rng.normal(size=hidden), dtype)
    keep = tf.constant(rng.random((rows, hidden)) > 0.1)
    gamma = tf.constant(rng.normal(size=hidden), tf.float32)
    beta = tf.constant(rng.normal(size=hidden), tf.float32)
    upstream = tf.constant(rng.normal(size=(rows, hidden)), dtype)
    norm = keras_layer_norm(gamma, beta, 1e-12,
                            "mixed_bfloat16" if dtype == "bfloat16" else dtype)
    results = []
    for fused_form in (False, True):
        with tf.GradientTape() as tape:
            tape.watch([x, bias, residual, gamma, beta])
            if fused_form:
                output = fused.dropout_add_layer_norm(x, bias, residual, keep, 1 / 0.9, gamma,
                                                      beta, 1e-12)
                weights = [gamma, beta]
            else:
                output = reference(norm, x, bias, residual, keep, 1 / 0.9)
                weights = [norm.gamma, norm.beta]
        gradients = tape.gradient(output, [x, bias, residual] + weights,
                                  output_gradients=upstream)
        results.append([tf.cast(t, tf.float32).numpy() for t in [output] + gradients])
    assert results[1][0].dtype == np.float32 and results[0][0].shape == (rows, hidden)
    for expected, actual in zip(*results):
        scale = max(1.0, np.abs(expected).max())
        np.testing.assert_allclose(actual, expected, atol=tolerance * scale, rtol=0)
    dropped = ~keep.numpy()
    assert not np.any(results[1][1][dropped])  # no gradient reaches a dropped value
    # The bias's gradient is x's summed over rows.
    np.testing.assert_allclose(results[1][2], results[1][1].sum(axis=0), rtol=tolerance,
                               atol=tolerance * np.abs(results[1][1]).sum(axis=0).max())


def test_without_a_mask_nothing_is_dropped():
    x = tf.random.normal([3, 8])
    residual = tf.random.normal([3, 8])
    ones, zeros = tf.ones([8]), tf.zeros([8])
    np.testing.assert_allclose(
        fused.dropout_add_layer_norm(x, zeros, residual, None, 1.0, ones, zeros, 1e-12).numpy(),
        reference(keras_layer_norm(ones, zeros, 1e-12, "float32"), x, zeros, residual,
                  tf.ones_like(x, tf.bool), 1.0).numpy(),
        atol=1e-5)
