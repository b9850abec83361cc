import collections
import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling import BertConfig, BertModel
from modeling.encoder import fused, layers


def test_gelu_is_the_tanh_approximation():
    x = np.linspace(-5, 5, 101).astype("float32")
    expected = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    np.testing.assert_allclose(layers.gelu(tf.constant(x)).numpy(), expected, atol=1e-6)
    exact = 0.5 * x * (1 + np.array([math.erf(v / math.sqrt(2)) for v in x]))
    assert np.max(np.abs(expected - exact)) > 1e-4  # the two differ: the test could fail


def test_gelu_exact_is_the_erf_form_and_layer_norm_eps_comes_from_the_config(tiny_config):
    x = np.linspace(-5, 5, 101).astype("float32")
    exact = 0.5 * x * (1 + np.array([math.erf(v / math.sqrt(2)) for v in x]))
    np.testing.assert_allclose(layers.gelu_exact(tf.constant(x)).numpy(), exact, atol=1e-6)
    config = BertConfig.from_dict(dict(tiny_config.to_dict(), hidden_act="gelu_exact",
                                       layer_norm_eps=1e-5))
    model = BertModel(config)
    assert model.encoder.transformer_layers[1].intermediate.activation is layers.gelu_exact
    norms = [layer for layer in model._flatten_layers()
             if isinstance(layer, keras.layers.LayerNormalization)]
    assert {norm.epsilon for norm in norms} == {1e-5}


@pytest.mark.parametrize("name", ["gelu", "gelu_exact"])
def test_training_gelus_give_the_formulas_values_and_gradients(name):
    """The training forms, of (x, bias), run compiled by XLA, the derivative computed beside
    the value; their values are the function's own to 2 units in the last place (XLA's erf and
    tanh round otherwise than Eigen's) and their gradients its derivative: within 1e-8 of
    differentiating the formula in float64 (TensorFlow rounds some of the formula's constants),
    and within 5e-7 of that in float32 (differentiating the tanh form itself there is off by up
    to 4.1e-6). The bias's gradient is x's summed over rows.
    """
    plain = layers.get_activation(name)
    lean = {"gelu": layers.gelu_for_training, "gelu_exact": layers.gelu_exact_for_training}[name]

    def values_and_gradients(function, dtype, with_bias):
        x = tf.reshape(tf.constant(np.linspace(-8, 8, 4002), dtype), [-1, 2])
        bias = tf.constant([0.0, 0.0], dtype)
        with tf.GradientTape() as tape:
            tape.watch([x, bias])
            y = function(x, bias) if with_bias else function(x)
        x_gradient, bias_gradient = tape.gradient(y, [x, bias])
        if with_bias:
            np.testing.assert_allclose(bias_gradient.numpy(), x_gradient.numpy().sum(axis=0),
                                       rtol=1e-5)
        return y.numpy(), x_gradient.numpy().astype("float64")

    _, truth = values_and_gradients(plain, tf.float64, with_bias=False)
    for dtype, atol in ((tf.float64, 1e-8), (tf.float32, 5e-7)):
        y_lean, gradient = values_and_gradients(lean, dtype, with_bias=True)
        eps = np.finfo(dtype.as_numpy_dtype).eps
        # The tanh form's far negative tail, 0.5 x (1 + tanh u) with tanh u next to -1, comes
        # out as -0 or as a few units of eps.
        np.testing.assert_allclose(y_lean, values_and_gradients(plain, dtype, False)[0],
                                   rtol=2 * eps, atol=32 * eps)
        np.testing.assert_allclose(gradient, truth, rtol=0, atol=atol)
    model = BertModel(BertConfig(vocab_size=50, hidden_size=8, num_hidden_layers=1,
                                 num_attention_heads=2, intermediate_size=12, hidden_act=name))
    intermediate = model.encoder.transformer_layers[0].intermediate
    assert (intermediate.activation, intermediate.training_activation) == (plain, lean)


def test_pinned_numbers_differ_from_keras_defaults(tiny_config):
    model = BertModel(tiny_config)
    norms = [layer for layer in model._flatten_layers()
             if isinstance(layer, keras.layers.LayerNormalization)]
    assert len(norms) == 1 + 2 * tiny_config.num_hidden_layers
    assert all(norm.epsilon == 1e-12 for norm in norms)
    dense = model.encoder.transformer_layers[0].attention.self_attention.query
    assert isinstance(dense.kernel_initializer, keras.initializers.TruncatedNormal)
    assert dense.kernel_initializer.stddev == 0.02
    assert model.encoder.transformer_layers[0].intermediate.activation is layers.gelu
    assert layers.ATTENTION_MASK_ADDER == -10000.0


def test_padded_keys_get_exactly_zero_probability(tiny_config, tiny_inputs):
    probs = BertModel(tiny_config)(tiny_inputs)["attention_probs"]
    mask = tiny_inputs["input_mask"]
    for layer_probs in probs:
        layer_probs = layer_probs.numpy()  # [B, N, T, T]
        assert np.all(layer_probs[mask[:, None, None, :].repeat(7, 2).repeat(4, 1) == 0] == 0.0)
        np.testing.assert_allclose(layer_probs.sum(-1), 1.0, atol=1e-6)


def test_unknown_activation_is_rejected():
    try:
        layers.get_activation("swish")
    except ValueError as error:
        assert "swish" in str(error)
    else:
        raise AssertionError("no error")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_dropout_drops_the_rate_in_every_precision_and_keeps_the_expectation(dtype):
    # Keras draws its uniform number in the input's dtype: 0.1016 dropped in bfloat16.
    dropout = layers.Dropout(0.1, dtype=dtype, seed=7)
    outputs = dropout(tf.ones([3001, 1001], dtype), training=True).numpy().astype("float64")
    dropped = np.mean(outputs == 0)
    assert abs(dropped - 6554 / 65536) < 0.001  # 0.1 in multiples of 2^-16; 6 sigma
    kept = outputs[outputs != 0]
    np.testing.assert_allclose(kept, float(tf.cast(65536 / (65536 - 6554), dtype)))


def test_dropout_masks_follow_the_seed_generator_and_the_gradient_follows_the_mask():
    first, again = layers.Dropout(0.5, seed=3), layers.Dropout(0.5, seed=3)
    inputs = tf.range(1, 12, dtype=tf.float32)  # an odd size: the last 32-bit draw is half used
    masks = [first(inputs, training=True).numpy() for _ in range(2)]
    assert not np.array_equal(masks[0], masks[1])  # each call draws a new mask
    np.testing.assert_array_equal(again(inputs, training=True).numpy(), masks[0])
    with tf.GradientTape() as tape:
        tape.watch(inputs)
        outputs = again(inputs, training=True)
    gradient = tape.gradient(outputs, inputs).numpy()
    np.testing.assert_array_equal(gradient, np.where(outputs.numpy() != 0, 2.0, 0.0))
    np.testing.assert_array_equal(first(inputs, training=False).numpy(), inputs.numpy())
    assert not layers.Dropout(1.0)(inputs, training=True).numpy().any()


def test_a_dimension_known_even_draws_the_mask_of_unknown_dimensions():
    """An even static dimension spares the cut of a half-used last draw; the bits are the
    same as those the general form draws for the same size."""
    known, unknown = layers.Dropout(0.5, seed=5), layers.Dropout(0.5, seed=5)
    inputs = tf.reshape(tf.range(1, 25, dtype=tf.float32), [3, 8])
    unknown_shapes = tf.function(lambda x: unknown(x, training=True),
                                 input_signature=[tf.TensorSpec([None, None], tf.float32)])
    for _ in range(2):
        expected = unknown_shapes(inputs).numpy()
        np.testing.assert_array_equal(known(inputs, training=True).numpy(), expected)
        assert 0 < np.sum(expected == 0) < 24


@pytest.mark.parametrize("frozen", [[], [0]])
def test_a_traced_step_traces_one_layer_for_all_and_gets_each_layers_numbers(tiny_config,
                                                                              tiny_inputs,
                                                                              frozen):
    """In a traced training step the layers call one traced layer with their own weights and
    dropout seeds; the outputs and gradients (within float32 rounding) and the seeds' next
    states are those of calling each layer itself (as an eager step does). A frozen layer
    calls itself."""
    config = BertConfig.from_dict(dict(tiny_config.to_dict(), num_hidden_layers=4))
    model = BertModel(config)
    for index in frozen:
        model.encoder.transformer_layers[index].trainable = False
    positions = tf.constant([[0], [2], [1]])
    weights = {id(variable) for variable in model.weights}
    seed_states = [v for v in model.non_trainable_variables if id(v) not in weights]
    assert len(seed_states) == 1 + 3 * config.num_hidden_layers  # a dropout's each
    seeds = [variable.numpy() for variable in seed_states]

    def step():
        with tf.GradientTape() as tape:
            output = model.real_token_output(tiny_inputs, positions, training=True)
            loss = tf.reduce_sum(output * tf.range(1.0, 1.0 + config.hidden_size))
        return output, tape.gradient(loss, model.trainable_variables)

    eager_output, eager_gradients = step()
    eager_seeds = [variable.numpy() for variable in seed_states]
    for variable, value in zip(seed_states, seeds):
        variable.assign(value)
    traced = tf.function(step, autograph=False).get_concrete_function()
    traced_output, traced_gradients = traced()

    # Within float32 rounding: graph and eager kernels may sum in other orders (equal alone,
    # 5e-7 apart after other tests in the same process).
    eager_output = eager_output.numpy()
    np.testing.assert_allclose(traced_output.numpy(), eager_output,
                               atol=1e-6 * np.abs(eager_output).max())
    eager_by_path = {variable.path: None if gradient is None
                     else tf.convert_to_tensor(gradient).numpy()
                     for variable, gradient in zip(model.trainable_variables, eager_gradients)}
    for traced_gradient, variable in zip(traced_gradients, model.trainable_variables):
        eager_gradient = eager_by_path[variable.path]
        if eager_gradient is None:  # the pooler's
            assert traced_gradient is None and "pooler" in variable.path
            continue
        # Within float32 rounding of the largest. The keys' biases get none but rounding
        # (softmax ignores them): theirs is the rounding of sums of the keys' gradients, so
        # their scale is that of the key kernel's gradient, not their own.
        scale_path = variable.path.replace("key/bias", "key/kernel")
        np.testing.assert_allclose(tf.convert_to_tensor(traced_gradient).numpy(), eager_gradient,
                                   atol=1e-6 * np.abs(eager_by_path[scale_path]).max(),
                                   err_msg=variable.path)
    for variable, eager_seed, seed in zip(seed_states, eager_seeds, seeds):
        assert variable.numpy().tolist() == eager_seed.tolist() != seed.tolist()
    # The first three layers but the frozen ones call one traced layer, forward and backward;
    # the last one computes only `positions`.
    graph = traced.graph.as_graph_def()
    calls = collections.Counter(node.attr["f"].func.name for node in graph.node
                                if "layer_call" in node.attr["f"].func.name)
    shared = 3 - len(frozen)
    assert sorted(calls.values()) == [shared, shared], calls
    # Only the dropout seeds are assigned (the embeddings' and three a layer): no frozen weight.
    assigned = [node.name for node in graph.node if node.op == "AssignVariableOp"]
    assert len(assigned) == 1 + 3 * config.num_hidden_layers, assigned


def test_training_compiles_passes_for_the_token_rows_but_not_the_heads_positions(
        tiny_config, tiny_inputs, monkeypatch):
    """Every layer's GELU and LayerNorms run as compiled passes on the batch's real tokens,
    but the last layer's at the few positions a head reads: XLA would compile each pass once
    more for that row count, for rows that TensorFlow's operations compute in microseconds."""
    rows_compiled = []
    layer_norm, gelu = fused.dropout_add_layer_norm, layers.gelu_for_training

    def layer_norm_spy(x, *args):
        rows_compiled.append(("layer_norm", x.shape[0]))
        return layer_norm(x, *args)

    def gelu_spy(x, bias):
        rows_compiled.append(("gelu", x.shape[0]))
        return gelu(x, bias)
    monkeypatch.setattr(fused, "dropout_add_layer_norm", layer_norm_spy)
    monkeypatch.setattr(layers, "gelu_for_training", gelu_spy)
    model = BertModel(tiny_config)  # two layers
    output = model.real_token_output(tiny_inputs, tf.constant([[0], [2], [1]]), training=True)
    assert output.shape == [3, 1, tiny_config.hidden_size]
    real_tokens = int(tiny_inputs["input_mask"].sum())
    assert sorted(rows_compiled) == [("gelu", real_tokens)] + [("layer_norm", real_tokens)] * 2


def test_training_without_compiled_passes_draws_the_same_dropout_and_numbers(tiny_config):
    """The last layer's blocks at a head's positions, computed by TensorFlow's operations,
    drop what the compiled passes drop and give their numbers."""
    rng = np.random.default_rng(5)
    intermediate = layers.Intermediate(tiny_config)
    intermediate.build()
    output_block = layers.DenseLayerNorm(tiny_config, tiny_config.intermediate_size)
    output_block.build()
    rows = tf.constant(rng.normal(size=[6, tiny_config.hidden_size]), tf.float32)
    residual = tf.constant(rng.normal(size=[6, tiny_config.hidden_size]), tf.float32)
    seeds = [variable.numpy() for variable in output_block.non_trainable_variables]
    results = []
    for compiled in (True, False):
        for variable, seed in zip(output_block.non_trainable_variables, seeds):
            variable.assign(seed)
        hidden = intermediate(rows, training=True, compiled=compiled)
        results.append((hidden.numpy(), output_block(hidden, residual, training=True,
                                                     compiled=compiled).numpy()))
    undropped = output_block(tf.constant(results[0][0]), residual).numpy()
    # Dropout dropped something: far more than the tolerance below.
    assert np.abs(undropped - results[0][1]).max() > 1e-3
    for compiled_result, plain_result in zip(*results):
        np.testing.assert_allclose(plain_result, compiled_result, atol=1e-5)


def test_dropped_attention_gives_the_formulas_values_and_gradients():
    """The attention context after dropout, whose backward pass recomputes the dropped
    probabilities, equals TensorFlow differentiating the formula itself (to rounding)."""
    rng = np.random.default_rng(3)
    probs = tf.constant(rng.random([3, 4, 7, 7]), tf.float32)  # [B, N, Tq, T]
    value = tf.constant(rng.normal(size=[3, 4, 7, 5]), tf.float32)  # [B, N, T, D]
    keep = tf.constant(rng.random([3, 4, 7, 7]) > 0.3)
    upstream = tf.constant(rng.normal(size=[3, 4, 7, 5]), tf.float32)

    def gradients(context):
        with tf.GradientTape() as tape:
            tape.watch([probs, value])
            output = context(probs, value)
            loss = tf.reduce_sum(output * upstream)
        return [output, *tape.gradient(loss, [probs, value])]

    ours = gradients(lambda p, v: layers.dropped_attention(p, v, keep, 1 / 0.7))
    formula = gradients(lambda p, v: tf.matmul(tf.where(keep, p / 0.7, 0.0), v))
    for got, expected in zip(ours, formula):
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-6, atol=1e-6)
    assert np.all(ours[1].numpy()[~keep.numpy()] == 0)  # a dropped probability gets none


def test_every_layer_norm_is_built_for_the_rank_it_normalizes(tiny_config, tiny_inputs,
                                                              monkeypatch):
    """Keras resolves a LayerNormalization's axis against the shape it is built for: one built
    for [B, T, H] and called on rows [n, H] fails from Keras 3.16 on (IndexError)."""
    from modeling.models.pretraining import BertPretrainer
    built, called = {}, []
    build, call = keras.layers.LayerNormalization.build, keras.layers.LayerNormalization.call

    def recording_build(self, input_shape):
        built[id(self)] = len(input_shape)
        return build(self, input_shape)

    def recording_call(self, inputs, *args, **kwargs):
        called.append((self.path, built[id(self)], len(inputs.shape)))
        return call(self, inputs, *args, **kwargs)

    monkeypatch.setattr(keras.layers.LayerNormalization, "build", recording_build)
    monkeypatch.setattr(keras.layers.LayerNormalization, "call", recording_call)
    model = BertPretrainer(tiny_config)
    inputs = dict(tiny_inputs, masked_lm_positions=tf.constant([[1, 2]] * 3, tf.int32))
    for training in (False, True):
        model(inputs, training=training)
    # Every one is called: the embeddings', two a layer, the masked-LM head's.
    assert len({path for path, _, _ in called}) == 2 * tiny_config.num_hidden_layers + 2
    assert [(path, rank) for path, rank, called_rank in called if rank != called_rank] == []
