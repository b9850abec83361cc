"""The building blocks of BERT, one Keras layer per variable scope of the original `modeling.py`.

Shape legend (as in the original):
  B = batch size            T = sequence length (from = to, this is self-attention)
  H = hidden size           N = number of attention heads
  D = size per head (H/N)   I = intermediate size        V = vocabulary size

Each layer builds its children inside its own `build`, so that Keras nests the variable paths;
the models at the top (`BertModel`, the heads) call `build` in their constructors, which fixes
every `path` to the original checkpoint name whatever model later contains them.
"""
import math

import keras
import tensorflow as tf

ATTENTION_MASK_ADDER = -10000.0  # large enough that exp() underflows to exactly 0 in float32


def gelu(x):
    """GELU with the tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).

    This is the original's formula. Written with `tf.nn.gelu`, after a 2-D matmul and bias add
    (`dense_on_rows`), it matches the pattern that oneDNN fuses into one kernel, instead of nine
    element-wise passes over [B*T, I] (benchmarks/README.md).

    Args:
      x: float Tensor of any shape.

    Returns:
      Tensor of the same shape and dtype.
    """
    return tf.nn.gelu(x, approximate=True)


def gelu_exact(x):
    """GELU without approximation: x Φ(x) = 0.5 x (1 + erf(x / sqrt(2))).

    What Hugging Face and PyTorch call "gelu". Models trained with it (most Hugging Face BERTs)
    need it to reproduce their outputs: the tanh form is up to 5e-4 away (at x = 2.7) and the
    difference grows through the layers (README.md, "Hugging Face models, in and out").

    Args:
      x: float Tensor of any shape.

    Returns:
      Tensor of the same shape and dtype.
    """
    return tf.nn.gelu(x, approximate=False)


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_TANH_CUBIC = 0.044715


@tf.custom_gradient
def gelu_for_training(x):
    """`gelu` whose backward pass keeps only `x`: y' = 0.5 (1 + tanh u) + 0.5 x u' / cosh^2 u,
    u = sqrt(2/pi) (x + 0.044715 x^3).

    Differentiating the formula keeps its intermediate [B*T, I] tensors for the backward pass
    instead, three of them: about 50 MB a layer at MiniLM's batch 32 x 128, 311 MB of a
    training step's peak memory (benchmarks/README.md).
    """
    def gradient(upstream):
        cubic = _TANH_CUBIC * tf.square(x)
        u = _SQRT_2_OVER_PI * x * (1.0 + cubic)
        du_dx = _SQRT_2_OVER_PI * (1.0 + 3.0 * cubic)
        # 1 - tanh(u)^2 as 1 / cosh(u)^2: no cancellation where tanh(u) is near +-1.
        return upstream * (0.5 * (1.0 + tf.tanh(u)) + 0.5 * x / tf.square(tf.cosh(u)) * du_dx)
    return gelu(x), gradient


@tf.custom_gradient
def gelu_exact_for_training(x):
    """`gelu_exact` whose backward pass keeps only `x`: y' = Phi(x) + x phi(x) (see
    `gelu_for_training`)."""
    def gradient(upstream):
        cdf = 0.5 * tf.math.erfc(-x * math.sqrt(0.5))
        pdf = tf.exp(-0.5 * tf.square(x)) * (1.0 / math.sqrt(2.0 * math.pi))
        return upstream * (cdf + x * pdf)
    return gelu_exact(x), gradient


def get_activation(name):
    """Maps the config's activation names to functions (`linear` is the identity)."""
    activations = {"gelu": gelu, "gelu_exact": gelu_exact, "relu": tf.nn.relu, "tanh": tf.tanh,
                   "linear": None}
    if name not in activations:
        raise ValueError(f"Unsupported activation {name!r}; expected one of {sorted(activations)}")
    return activations[name]


def initializer(initializer_range):
    """The original's TruncatedNormal(stddev=initializer_range); Keras' default is Glorot."""
    return keras.initializers.TruncatedNormal(stddev=initializer_range)


def root_output_variables(config, num_outputs, stddev=None):
    """A task head's `output_weights` [num_outputs, H] and `output_bias` [num_outputs], named
    at the checkpoint's root as run_classifier's; read in float32 (no autocast), so the head
    casts them itself under mixed precision. `stddev` defaults to the config's range."""
    weights = keras.Variable(initializer(stddev or config.initializer_range)(
        (num_outputs, config.hidden_size)), name="output_weights", autocast=False)
    bias = keras.Variable(tf.zeros([num_outputs]), name="output_bias", autocast=False)
    return weights, bias


def layer_norm(config):
    """LayerNorm over the last axis with the config's epsilon (the original's 1e-12 unless a
    converted model says otherwise)."""
    return keras.layers.LayerNormalization(epsilon=config.layer_norm_eps, name="LayerNorm")


def dense(units, config, name, activation=None):
    return keras.layers.Dense(units, activation=activation, name=name,
                              kernel_initializer=initializer(config.initializer_range))


def dense_on_rows(layer, inputs, activation=None):
    """Applies a Dense `layer`, then `activation` if given, to float [B, T, in] as one
    [B*T, in] matmul; returns [B, T, out].

    Keras runs a 3-D input through tensordot, which leaves a reshape between the matmul and the
    bias add; on a matrix, as in the original's `reshape_to_matrix`, oneDNN fuses matmul, bias add
    and GELU into one kernel.
    """
    rows = tf.reshape(inputs, [-1, inputs.shape[-1]])  # [B*T, in]
    outputs = layer(rows)  # [B*T, out]
    if activation is not None:
        outputs = activation(outputs)
    return tf.reshape(outputs, tf.concat([tf.shape(inputs)[:-1], [layer.units]], axis=0))


class Dropout(keras.layers.Dropout):
    """Keras' Dropout, with 16 random bits a decision instead of a float32 draw.

    Drawing the random numbers is most of dropout's time on a CPU, and a training step draws
    one per element of every [B, N, T, T] attention probability and every [B, T, H] hidden
    state: TensorFlow's Philox generator, 32 bits a value, took 6% of a MiniLM step at
    32 x 64 (benchmarks/README.md). Each 32-bit draw here makes two decisions. The dropped
    fraction is the rate rounded to a multiple of 2^-16 (0.1 -> 0.100006) and the kept values
    are scaled by the inverse of the exact kept fraction, so the expectation is unchanged.
    Keras draws the uniform number in the input's dtype instead, which under mixed_bfloat16
    drops 13/128 = 0.1016 of the values for a rate of 0.1.

    The seed generator, its state (checkpointed so that a resumed run draws the masks an
    uninterrupted one would) and the config are Keras'.
    """

    LEVELS = 1 << 16

    def call(self, inputs, training=False):
        dropped_levels = round(self.rate * self.LEVELS)
        if not training or dropped_levels == 0:
            return inputs
        if dropped_levels == self.LEVELS:
            return tf.zeros_like(inputs)
        # TensorFlow's stateless ops take int32 seeds; the generator's state is int64.
        seed = tf.cast(tf.math.floormod(self.seed_generator.next(), tf.int32.max - 1), tf.int32)
        size = tf.size(inputs)
        words = tf.random.stateless_uniform([(size + 1) // 2], seed, minval=None, maxval=None,
                                            dtype=tf.uint32)
        halves = tf.reshape(tf.bitcast(words, tf.uint16), [-1])[:size]
        keep = tf.reshape(halves, tf.shape(inputs)) >= tf.constant(dropped_levels, tf.uint16)
        scale = self.LEVELS / (self.LEVELS - dropped_levels)
        return tf.where(keep, inputs * tf.cast(scale, inputs.dtype), tf.zeros_like(inputs))


class BertEmbeddings(keras.layers.Layer):
    """Owns `embeddings/{word,token_type,position}_embeddings` and `embeddings/LayerNorm`."""

    def __init__(self, config, **kwargs):
        super().__init__(name="embeddings", **kwargs)
        self.config = config
        self.layer_norm = layer_norm(config)
        self.dropout = Dropout(config.hidden_dropout_prob)

    def build(self, input_shape=None):
        config = self.config
        init = initializer(config.initializer_range)
        # Not autocast: under mixed precision `call` casts the rows it gathers, not the whole
        # [V, H] table at every step.
        self.word_embeddings = self.add_weight(
            name="word_embeddings", shape=(config.vocab_size, config.hidden_size),
            initializer=init, autocast=False)
        self.token_type_embeddings = self.add_weight(
            name="token_type_embeddings", shape=(config.type_vocab_size, config.hidden_size),
            initializer=init, autocast=False)
        self.position_embeddings = self.add_weight(
            name="position_embeddings",
            shape=(config.max_position_embeddings, config.hidden_size), initializer=init,
            autocast=False)
        self.layer_norm.build((None, None, config.hidden_size))

    def call(self, input_ids, token_type_ids, training=False):
        """Sums word, token-type and position embeddings, then LayerNorm and dropout.

        Args:
          input_ids: int32 Tensor [B, T].
          token_type_ids: int32 Tensor [B, T].
          training: bool, enables dropout.

        Returns:
          float Tensor [B, T, H].
        """
        seq_length = tf.shape(input_ids)[1]
        dtype = self.compute_dtype
        output = tf.cast(tf.gather(self.word_embeddings, input_ids), dtype)  # [B, T, H]
        # The original multiplies a one-hot matrix by the table; a gather gives the same numbers.
        output += tf.cast(tf.gather(self.token_type_embeddings, token_type_ids), dtype)
        output += tf.cast(self.position_embeddings[:seq_length], dtype)[tf.newaxis]  # [1, T, H]
        output = self.layer_norm(output)
        return self.dropout(output, training=training)


class SelfAttention(keras.layers.Layer):
    """Owns `attention/self/{query,key,value}/{kernel,bias}`."""

    def __init__(self, config, **kwargs):
        super().__init__(name="self", **kwargs)
        self.num_heads = config.num_attention_heads
        self.size_per_head = config.size_per_head
        self.query = dense(config.hidden_size, config, "query")
        self.key = dense(config.hidden_size, config, "key")
        self.value = dense(config.hidden_size, config, "value")
        self.dropout = Dropout(config.attention_probs_dropout_prob)
        self.hidden_size = config.hidden_size

    def build(self, input_shape=None):
        for layer in (self.query, self.key, self.value):
            layer.build((None, None, self.hidden_size))

    def _split_heads(self, x, batch_size, seq_length):
        x = tf.reshape(x, [batch_size, seq_length, self.num_heads, self.size_per_head])
        return tf.transpose(x, [0, 2, 1, 3])  # [B, N, T, D]

    def call(self, hidden_states, attention_adder, training=False):
        """Scaled dot-product attention of every position to every unmasked position.

        Args:
          hidden_states: float Tensor [B, T, H].
          attention_adder: float Tensor [B, 1, 1, T], 0 where a key may be attended to and
            -10000 where it is padding.
          training: bool, enables dropout on the attention probabilities.

        Returns:
          context: float Tensor [B, T, H].
          probs: float Tensor [B, N, T, T], the attention probabilities before dropout.
        """
        shape = tf.shape(hidden_states)
        batch_size, seq_length = shape[0], shape[1]
        query = self._split_heads(dense_on_rows(self.query, hidden_states), batch_size, seq_length)
        key = self._split_heads(dense_on_rows(self.key, hidden_states), batch_size, seq_length)
        value = self._split_heads(dense_on_rows(self.value, hidden_states), batch_size, seq_length)

        scores = tf.matmul(query, key, transpose_b=True)  # [B, N, T, T]
        scores *= tf.cast(1.0 / math.sqrt(float(self.size_per_head)), scores.dtype)
        scores += tf.cast(attention_adder, scores.dtype)
        probs = tf.nn.softmax(scores)
        # This drops whole tokens to attend to, as in the Transformer paper.
        context = tf.matmul(self.dropout(probs, training=training), value)  # [B, N, T, D]
        context = tf.transpose(context, [0, 2, 1, 3])  # [B, T, N, D]
        context = tf.reshape(context, [batch_size, seq_length, self.num_heads * self.size_per_head])
        return context, probs


class DenseLayerNorm(keras.layers.Layer):
    """Dense projection, dropout, residual add and LayerNorm.

    Owns `<name>/dense/{kernel,bias}` and `<name>/LayerNorm/{gamma,beta}`; it is the original's
    `attention/output` (H -> H) and `output` (I -> H) scopes.
    """

    def __init__(self, config, input_size, name="output", **kwargs):
        super().__init__(name=name, **kwargs)
        self.dense = dense(config.hidden_size, config, "dense")
        self.dropout = Dropout(config.hidden_dropout_prob)
        self.layer_norm = layer_norm(config)
        self.input_size = input_size

    def build(self, input_shape=None):
        self.dense.build((None, None, self.input_size))
        self.layer_norm.build((None, None, self.dense.units))

    def call(self, hidden_states, residual, training=False):
        """Args: hidden_states [B, T, input_size], residual [B, T, H]. Returns [B, T, H]."""
        output = self.dropout(dense_on_rows(self.dense, hidden_states), training=training)
        return self.layer_norm(output + residual)


class Attention(keras.layers.Layer):
    """Owns `attention/self/*` and `attention/output/*`."""

    def __init__(self, config, **kwargs):
        super().__init__(name="attention", **kwargs)
        self.self_attention = SelfAttention(config)
        self.output_block = DenseLayerNorm(config, config.hidden_size)

    def build(self, input_shape=None):
        self.self_attention.build()
        self.output_block.build()

    def call(self, hidden_states, attention_adder, training=False):
        """Returns the attention output [B, T, H] and the probabilities [B, N, T, T]."""
        context, probs = self.self_attention(hidden_states, attention_adder, training=training)
        return self.output_block(context, hidden_states, training=training), probs


class TransformerLayer(keras.layers.Layer):
    """Owns `layer_<i>/attention/*`, `layer_<i>/intermediate/dense/*` and `layer_<i>/output/*`."""

    def __init__(self, config, index, **kwargs):
        super().__init__(name=f"layer_{index}", **kwargs)
        self.attention = Attention(config)
        self.intermediate = Intermediate(config)
        self.output_block = DenseLayerNorm(config, config.intermediate_size)

    def build(self, input_shape=None):
        self.attention.build()
        self.intermediate.build()
        self.output_block.build()

    def call(self, hidden_states, attention_adder, training=False):
        """Returns the layer output [B, T, H] and its attention probabilities [B, N, T, T]."""
        attention_output, probs = self.attention(hidden_states, attention_adder, training=training)
        intermediate_output = self.intermediate(attention_output, training=training)  # [B, T, I]
        return self.output_block(intermediate_output, attention_output, training=training), probs


class Intermediate(keras.layers.Layer):
    """Owns `intermediate/dense/{kernel,bias}`: the feed-forward expansion H -> I."""

    def __init__(self, config, **kwargs):
        super().__init__(name="intermediate", **kwargs)
        self.dense = dense(config.intermediate_size, config, "dense")
        self.activation = get_activation(config.hidden_act)
        # The same function, with a backward pass that keeps less (see gelu_for_training).
        self.training_activation = {gelu: gelu_for_training,
                                    gelu_exact: gelu_exact_for_training}.get(self.activation,
                                                                             self.activation)
        self.hidden_size = config.hidden_size

    def build(self, input_shape=None):
        self.dense.build((None, None, self.hidden_size))

    def call(self, hidden_states, training=False):
        """Args: hidden_states [B, T, H]. Returns [B, T, I]."""
        return dense_on_rows(self.dense, hidden_states,
                             self.training_activation if training else self.activation)


class Encoder(keras.layers.Layer):
    """Owns `encoder/layer_0/*` ... `encoder/layer_<L-1>/*`."""

    def __init__(self, config, **kwargs):
        super().__init__(name="encoder", **kwargs)
        self.transformer_layers = [
            TransformerLayer(config, i) for i in range(config.num_hidden_layers)]

    def build(self, input_shape=None):
        for layer in self.transformer_layers:
            layer.build()

    def call(self, hidden_states, attention_adder, training=False):
        """Returns the list of every layer's output [B, T, H] and of its probabilities."""
        all_outputs, all_probs = [], []
        for layer in self.transformer_layers:
            hidden_states, probs = layer(hidden_states, attention_adder, training=training)
            all_outputs.append(hidden_states)
            all_probs.append(probs)
        return all_outputs, all_probs


class Pooler(keras.layers.Layer):
    """Owns `pooler/dense/{kernel,bias}`: tanh(dense(hidden state of the first token))."""

    def __init__(self, config, **kwargs):
        super().__init__(name="pooler", **kwargs)
        self.dense = dense(config.hidden_size, config, "dense", activation="tanh")
        self.hidden_size = config.hidden_size

    def build(self, input_shape=None):
        self.dense.build((None, self.hidden_size))

    def call(self, sequence_output):
        """Args: sequence_output [B, T, H]. Returns [B, H]."""
        # A slice and a reshape rather than [:, 0], so that an empty batch ([0, 0, H]) pools
        # to [0, H] instead of failing.
        first_token = tf.reshape(sequence_output[:, :1], [-1, self.hidden_size])  # [B, H]
        return self.dense(first_token)
