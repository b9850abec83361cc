"""The building blocks of BERT, one Keras layer per variable scope of the original `modeling.py`.

Shape legend (as in the original):
  B = batch size            T = sequence length (from = to, this is self-attention)
  H = hidden size           N = number of attention heads
  D = size per head (H/N)   I = intermediate size        V = vocabulary size
  n = rows: the positions a layout computes (`token_rows`), B*T or the real tokens

Each layer builds its children inside its own `build`, so that Keras nests the variable paths;
the models at the top (`BertModel`, the heads) call `build` in their constructors, which fixes
every `path` to the original checkpoint name whatever model later contains them.
"""
import math

import keras
import tensorflow as tf

from modeling.encoder import fused, token_rows

ATTENTION_MASK_ADDER = -10000.0  # large enough that exp() underflows to exactly 0 in float32


def gelu(x):
    """GELU with the tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).

    This is the original's formula. Written with `tf.nn.gelu`, after a 2-D matmul and bias add
    (the encoder's layers work on rows, `token_rows`), it matches the pattern that oneDNN fuses
    into one kernel, instead of nine element-wise passes over [rows, I]
    (benchmarks/history/forward.md).

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
    difference grows through the layers (docs/checkpoints.md, "GELU").

    Args:
      x: float Tensor of any shape.

    Returns:
      Tensor of the same shape and dtype.
    """
    return tf.nn.gelu(x, approximate=False)


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_TANH_CUBIC = 0.044715


def _gelu_derivative(x):
    """gelu'(x) = 0.5 (1 + tanh u) + 0.5 x u' / cosh^2 u, u = sqrt(2/pi) (x + 0.044715 x^3)."""
    cubic = _TANH_CUBIC * tf.square(x)
    u = _SQRT_2_OVER_PI * x * (1.0 + cubic)
    du_dx = _SQRT_2_OVER_PI * (1.0 + 3.0 * cubic)
    # 1 - tanh(u)^2 as 1 / cosh(u)^2: no cancellation where tanh(u) is near +-1.
    return 0.5 * (1.0 + tf.tanh(u)) + 0.5 * x / tf.square(tf.cosh(u)) * du_dx


def _gelu_exact_derivative(x):
    """gelu_exact'(x) = Phi(x) + x phi(x). Phi from erf, not erfc: XLA's erf is a polynomial
    and a fifth faster; in the far negative tail, where 1 + erf cancels, Phi is below 3e-7."""
    cdf = 0.5 + 0.5 * tf.math.erf(x * math.sqrt(0.5))
    pdf = tf.exp(-0.5 * tf.square(x)) * (1.0 / math.sqrt(2.0 * math.pi))
    return cdf + x * pdf


# Training's forms, of (x, bias): compiled, the derivative computed with the value (`fused`).
gelu_for_training = fused.activation_with_bias(gelu, _gelu_derivative)
gelu_exact_for_training = fused.activation_with_bias(gelu_exact, _gelu_exact_derivative)


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


def root_output_variables(config, num_outputs, weights_initializer=None):
    """A task head's `output_weights` [num_outputs, H] and `output_bias` [num_outputs], named
    at the checkpoint's root as run_classifier's; read in float32 (no autocast), so the head
    casts them itself under mixed precision. The weights are drawn by `weights_initializer`,
    by default the original's truncated normal of the config's range."""
    weights_initializer = weights_initializer or initializer(config.initializer_range)
    weights = keras.Variable(weights_initializer((num_outputs, config.hidden_size)),
                             name="output_weights", autocast=False)
    bias = keras.Variable(tf.zeros([num_outputs]), name="output_bias", autocast=False)
    return weights, bias


def layer_norm(config):
    """LayerNorm over the last axis with the config's epsilon (the original's 1e-12 unless a
    converted model says otherwise)."""
    return keras.layers.LayerNormalization(epsilon=config.layer_norm_eps, name="LayerNorm")


def dense(units, config, name, activation=None):
    return keras.layers.Dense(units, activation=activation, name=name,
                              kernel_initializer=initializer(config.initializer_range))


class Dropout(keras.layers.Dropout):
    """Keras' Dropout, with 16 random bits a decision instead of a float32 draw.

    Drawing the random numbers is most of dropout's time on a CPU, and a training step draws one per
    element of every [B, N, T, T] attention probability and every [B, T, H] hidden state, and
    TensorFlow's Philox generator draws 32 bits a value (its share of a step:
    benchmarks/history/finetuning_against_peer.md). Each 32-bit draw here makes two decisions.
    The dropped fraction is the rate rounded to a multiple of 2^-16 (0.1 -> 0.100006) and the
    kept values are scaled by the inverse of the exact kept fraction, so the expectation is
    unchanged. Keras draws the uniform number in the input's dtype instead, which under
    mixed_bfloat16 drops 13/128 = 0.1016 of the values for a rate of 0.1.

    The seed generator, its state (checkpointed so that a resumed run draws the masks an
    uninterrupted one would) and the config are Keras'.
    """

    LEVELS = 1 << 16

    def call(self, inputs, training=False):
        if not training:
            return inputs
        keep, scale = self.keep_mask(inputs)
        if keep is None:
            return inputs
        # A scalar zero: zeros of the input's shape would be one more tensor of its size.
        return tf.where(keep, inputs * tf.cast(scale, inputs.dtype), tf.zeros((), inputs.dtype))

    def keep_mask(self, inputs):
        """Draws a training step's mask for `inputs` (advancing the seed generator).

        Returns:
          (keep, scale): bool Tensor of inputs' shape, True where the value is kept, and the
          float the kept values are multiplied by; (None, 1.0) where the rate drops nothing.
        """
        dropped_levels = round(self.rate * self.LEVELS)
        if dropped_levels == 0:
            return None, 1.0
        if dropped_levels == self.LEVELS:
            return tf.zeros_like(inputs, tf.bool), 0.0
        with tf.name_scope(self.name):  # also where a fused pass, not `call`, applies the mask
            # TensorFlow's stateless ops take int32 seeds; the generator's state is int64.
            seed = tf.cast(tf.math.floormod(self.seed_generator.next(), tf.int32.max - 1),
                           tf.int32)
            size = tf.size(inputs)
            # An even dimension makes the size even: no half word to cut off (the same bits).
            even = any(dim is not None and dim % 2 == 0 for dim in inputs.shape)
            words = tf.random.stateless_uniform([size // 2 if even else (size + 1) // 2], seed,
                                                minval=None, maxval=None, dtype=tf.uint32)
            halves = tf.bitcast(words, tf.uint16)
            if not even:
                halves = tf.reshape(halves, [-1])[:size]
            keep = tf.reshape(halves, tf.shape(inputs)) >= tf.constant(dropped_levels, tf.uint16)
        return keep, self.LEVELS / (self.LEVELS - dropped_levels)


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
        self.layer_norm.build((None, config.hidden_size))  # called on rows [n, H]

    def call(self, input_ids, token_type_ids, layout, training=False):
        """Sums word, token-type and position embeddings, then LayerNorm and dropout.

        Args:
          input_ids: int32 Tensor [B, T].
          token_type_ids: int32 Tensor [B, T].
          layout: the `token_rows` layout of the batch: which positions get a row.
          training: bool, enables dropout.

        Returns:
          float Tensor [n, H], a row per position of the layout.
        """
        dtype = self.compute_dtype
        # The original multiplies one-hot matrices by the tables; gathers give the same numbers.
        output = tf.cast(tf.gather(self.word_embeddings, layout.rows(input_ids)), dtype)
        output += tf.cast(tf.gather(self.token_type_embeddings, layout.rows(token_type_ids)),
                          dtype)
        output += tf.cast(tf.gather(self.position_embeddings, layout.positions()), dtype)
        output = self.layer_norm(output)
        return self.dropout(output, training=training)


def attention_adder(input_mask, dtype):
    """What the attention scores get added: 0 where a key may be attended to, -10000 where it
    is padding, the same for every head and every query (the original's attention mask).

    Args:
      input_mask: int Tensor [B, T], 1 for real tokens and 0 for padding.
      dtype: the scores' dtype.

    Returns:
      Tensor [B, 1, 1, T].
    """
    mask = tf.cast(input_mask[:, tf.newaxis, tf.newaxis, :], dtype)  # [B, 1, 1, T]
    return (1.0 - mask) * ATTENTION_MASK_ADDER


def left_to_right_attention_adder(input_mask, dtype):
    """`attention_adder` for a left-to-right model: each query also gets -10000 for every key
    after it, so that position t sees only positions 0..t (the paper's LTR ablation).

    Returns:
      Tensor [B, 1, T, T], one row per query position.
    """
    seq_length = tf.shape(input_mask)[1]
    later = tf.linalg.band_part(tf.ones([seq_length, seq_length], dtype), 0, -1) - \
        tf.linalg.band_part(tf.ones([seq_length, seq_length], dtype), 0, 0)  # [T, T], k > q
    return attention_adder(input_mask, dtype) + later * ATTENTION_MASK_ADDER  # [B, 1, T, T]


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
            layer.build((None, self.hidden_size))  # rows [n, H]

    def _split_heads(self, rows, layout):
        """Rows [n, H] of `layout` -> [B, N, T, D]. The layout's own batch size and length:
        the tensor's shape, read anew, cost three operations to trace a call."""
        x = tf.reshape(layout.batch(rows), [layout.batch_size, layout.seq_length,
                                            self.num_heads, self.size_per_head])
        return tf.transpose(x, [0, 2, 1, 3])  # [B, N, T, D]

    def call(self, query_rows, key_rows, attention_adder, query_layout, key_layout,
             training=False):
        """Scaled dot-product attention of each query to every unmasked position.

        Args:
          query_rows: float Tensor [q, H], the rows whose outputs are wanted.
          key_rows: float Tensor [n, H], the rows attended to.
          attention_adder: float Tensor [B, 1, 1, T], or [B, 1, Tq, T] with a row per query:
            0 where a key may be attended to and -10000 where not (`attention_adder`).
          query_layout: the query rows' `token_rows` layout, [B, Tq] positions.
          key_layout: the key rows' layout, [B, T] positions.
          training: bool, enables dropout on the attention probabilities.

        Returns:
          context: float Tensor [q, H].
          probs: float Tensor [B, N, Tq, T], the attention probabilities before dropout.
        """
        query = self._split_heads(self.query(query_rows), query_layout)  # [B, N, Tq, D]
        key = self._split_heads(self.key(key_rows), key_layout)  # [B, N, T, D]
        value = self._split_heads(self.value(key_rows), key_layout)  # [B, N, T, D]

        scores = tf.matmul(query, key, transpose_b=True)  # [B, N, Tq, T]
        scores *= tf.cast(1.0 / math.sqrt(float(self.size_per_head)), scores.dtype)
        scores += tf.cast(attention_adder, scores.dtype)
        probs = tf.nn.softmax(scores)
        # This drops whole tokens to attend to, as in the Transformer paper.
        keep, dropout_scale = self.dropout.keep_mask(probs) if training else (None, 1.0)
        if keep is None:
            context = tf.matmul(probs, value)  # [B, N, Tq, D]
        else:
            context = dropped_attention(probs, value, keep, dropout_scale)  # [B, N, Tq, D]
        context = tf.transpose(context, [0, 2, 1, 3])  # [B, Tq, N, D]
        context = tf.reshape(context, [query_layout.batch_size, query_layout.seq_length,
                                       self.num_heads * self.size_per_head])
        return query_layout.rows(context), probs


def dropped_attention(probs, value, keep, scale):
    """The context of attention probabilities after dropout, `where(keep, probs * scale, 0)`
    times the values, whose backward pass forms the dropped probabilities again from `probs`
    and the mask instead of keeping them.

    The [B, N, Tq, T] tensors are most of a training step's memory at long sequences, and
    TensorFlow's own gradients keep more of them a layer beside the probabilities that the
    softmax's gradient keeps anyway: the dropped probabilities (for the matmul's gradient),
    the scaled ones (the Select's gradient takes the shape of its zeros from them) and those
    zeros, which the executor makes in the forward pass, as soon as their input exists. This
    keeps the probabilities and the one-byte mask. The gradients are the same formulas.

    Args:
      probs: float Tensor [B, N, Tq, T], the attention probabilities.
      value: float Tensor [B, N, T, D] of probs' dtype.
      keep: bool Tensor [B, N, Tq, T], where dropout keeps a probability.
      scale: float, what the kept probabilities are multiplied by.

    Returns:
      float Tensor [B, N, Tq, D].
    """
    def dropped(probs):
        return tf.where(keep, probs * tf.cast(scale, probs.dtype), tf.zeros((), probs.dtype))

    @tf.custom_gradient
    def context(probs, value):
        def gradient(upstream):  # [B, N, Tq, D]
            # TensorFlow runs an op as soon as its inputs are there: without waiting for the
            # upstream gradient, the dropped probabilities would be formed again during the
            # forward pass and held until now.
            with tf.control_dependencies([upstream]):
                value_gradient = tf.matmul(dropped(probs), upstream, transpose_a=True)
            dropped_gradient = tf.matmul(upstream, value, transpose_b=True)  # [B, N, Tq, T]
            return dropped(dropped_gradient), value_gradient
        return tf.matmul(dropped(probs), value), gradient
    return context(probs, value)


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
        self.dense.build((None, self.input_size))  # rows [n, input_size]
        self.layer_norm.build((None, self.dense.units))

    def call(self, rows, residual, training=False, compiled=True):
        """Args: rows [n, input_size], residual [n, H]; compiled: in training, use the
        compiled pass (`TransformerLayer.call` says when not). Returns [n, H]."""
        if training and compiled:
            return self._fused_for_training(rows, residual)
        outputs = self.dropout(self.dense(rows), training=training)
        return self.layer_norm(outputs + residual)

    def _fused_for_training(self, rows, residual):
        """`call` with dropout: the bias, dropout, residual and LayerNorm in one compiled
        pass (`fused.dropout_add_layer_norm`), which also sums the bias's gradient."""
        output = tf.matmul(rows, tf.cast(self.dense.kernel, self.compute_dtype))
        keep, scale = self.dropout.keep_mask(output)
        norm = self.layer_norm
        return fused.dropout_add_layer_norm(output, tf.cast(self.dense.bias, self.compute_dtype),
                                            residual, keep, scale,
                                            tf.cast(norm.gamma, tf.float32),
                                            tf.cast(norm.beta, tf.float32), norm.epsilon)


class Attention(keras.layers.Layer):
    """Owns `attention/self/*` and `attention/output/*`."""

    def __init__(self, config, **kwargs):
        super().__init__(name="attention", **kwargs)
        self.self_attention = SelfAttention(config)
        self.output_block = DenseLayerNorm(config, config.hidden_size)

    def build(self, input_shape=None):
        self.self_attention.build()
        self.output_block.build()

    def call(self, query_rows, key_rows, attention_adder, query_layout, key_layout,
             training=False, compiled=True):
        """Returns the attention output [q, H] of the query rows and the probabilities
        [B, N, Tq, T] (see `SelfAttention`)."""
        context, probs = self.self_attention(
            query_rows, key_rows, attention_adder, query_layout=query_layout,
            key_layout=key_layout, training=training)
        return self.output_block(context, query_rows, training=training,
                                 compiled=compiled), probs


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

    def call(self, rows, attention_adder, layout, training=False, positions=None):
        """One layer over the rows of `layout`.

        Args:
          rows: float Tensor [n, H], the previous layer's output.
          attention_adder: float Tensor [B, 1, 1, T], or [B, 1, T, T] with a row per query.
          layout: the rows' `token_rows` layout.
          training: bool, enables dropout.
          positions: optional int Tensor [B, P]: compute the output only at these positions
            of each sequence (they attend to every position all the same).

        Returns:
          The layer's output, float Tensor [n, H], or [B*P, H] at `positions`; and its
          attention probabilities [B, N, T or P, T].

        At `positions` the rows are few (a classifier's B [CLS] rows), and training computes
        them with TensorFlow's operations, as inference does, instead of compiled passes: XLA
        compiles a pass for each row count, and those four compilations were 0.3 s of a cold
        run's first step, while the passes padded the rows to 256 at every step
        (benchmarks/history/first_step.md).
        """
        compiled = positions is None
        if positions is None:
            query_rows, query_layout = rows, layout
        else:
            query_rows = tf.gather(rows, tf.reshape(layout.row_of(positions), [-1]))  # [B*P, H]
            query_layout = token_rows.AllPositions(positions)
            if attention_adder.shape[2] != 1:  # a row per query: those of the positions
                attention_adder = tf.gather(attention_adder, tf.cast(positions, tf.int32),
                                            axis=2, batch_dims=1)  # [B, 1, P, T]
        attention_output, probs = self.attention(
            query_rows, rows, attention_adder, query_layout=query_layout, key_layout=layout,
            training=training, compiled=compiled)
        intermediate_output = self.intermediate(attention_output, training=training,
                                                compiled=compiled)  # [q, I]
        return self.output_block(intermediate_output, attention_output, training=training,
                                 compiled=compiled), probs


class Intermediate(keras.layers.Layer):
    """Owns `intermediate/dense/{kernel,bias}`: the feed-forward expansion H -> I."""

    def __init__(self, config, **kwargs):
        super().__init__(name="intermediate", **kwargs)
        self.dense = dense(config.intermediate_size, config, "dense")
        self.activation = get_activation(config.hidden_act)
        # The same function of (x, bias), compiled, with a backward pass that keeps less.
        self.training_activation = {gelu: gelu_for_training,
                                    gelu_exact: gelu_exact_for_training}.get(self.activation)
        self.hidden_size = config.hidden_size

    def build(self, input_shape=None):
        self.dense.build((None, self.hidden_size))  # rows [n, H]

    def call(self, rows, training=False, compiled=True):
        """Args: rows [n, H]; compiled: see `DenseLayerNorm.call`. Returns [n, I]."""
        if training and compiled and self.training_activation is not None:
            return self._compiled_for_training(rows)
        outputs = self.dense(rows)
        return outputs if self.activation is None else self.activation(outputs)

    def _compiled_for_training(self, rows):
        """`call`, its bias add and activation in one compiled pass that also sums the bias's
        gradient and keeps the activation's derivative for the backward pass."""
        outputs = tf.matmul(rows, tf.cast(self.dense.kernel, self.compute_dtype))
        return self.training_activation(outputs, tf.cast(self.dense.bias, self.compute_dtype))


class Encoder(keras.layers.Layer):
    """Owns `encoder/layer_0/*` ... `encoder/layer_<L-1>/*`."""

    def __init__(self, config, **kwargs):
        # Not autocast: `_SharedLayerCall` reads the layers' weights in their own dtype.
        super().__init__(name="encoder", autocast=False, **kwargs)
        self.transformer_layers = [
            TransformerLayer(config, i) for i in range(config.num_hidden_layers)]

    def build(self, input_shape=None):
        for layer in self.transformer_layers:
            layer.build()

    def call(self, rows, attention_adder, layout, training=False, positions=None):
        """Returns the list of every layer's output rows [n, H] (the last one's [B*P, H] at
        `positions` if given, see `TransformerLayer`) and of its attention probabilities."""
        all_outputs, all_probs = [], []
        last = len(self.transformer_layers) - 1
        shared = None
        if training and not tf.executing_eagerly():
            shared = self._shared_layer_call(attention_adder, layout)
        for index, layer in enumerate(self.transformer_layers):
            layer_positions = positions if index == last else None
            if (shared is not None and layer_positions is None
                    and _SharedLayerCall.trains_all_weights(layer)):
                rows, probs = shared(layer, rows)
            else:
                rows, probs = layer(rows, attention_adder, layout=layout, training=training,
                                    positions=layer_positions)
            all_outputs.append(rows)
            all_probs.append(probs)
        return all_outputs, all_probs

    def _shared_layer_call(self, attention_adder, layout):
        """One layer's training call, traced once for every layer whose weights are all
        trained (`_SharedLayerCall`); None where no layer's are."""
        for layer in self.transformer_layers:
            if _SharedLayerCall.trains_all_weights(layer):
                return _SharedLayerCall(layer, attention_adder, layout)
        return None


class _SharedLayerCall:
    """A training call of any of the encoder's layers, `(layer, rows) -> (rows, probs)`,
    traced once for all of them.

    The layers differ only in their weights, so one layer's call is traced as a function of
    its weights (Keras' `stateless_call`), and each layer calls that function with its own:
    tracing a training step builds one layer's graph, forward and backward, instead of one a
    layer (MiniLM's six layers: 0.45 s less of its first step; benchmarks/history/
    first_step.md). Each layer's dropout seeds (its only non-trainable state) go in, and their
    next values come out to be assigned. The runtime inlines each call when it instantiates
    the step (measured on CPUs, grappler off): called instead (`_noinline`), the first step was
    0.1-0.35 s shorter but CoNLL-2003's steps after it 3-17% slower (benchmarks/history/
    first_step.md).
    """

    def __init__(self, template, attention_adder, layout):
        @tf.function(autograph=False)
        def layer_call(trainable, seeds, rows):
            (rows, probs), seeds = template.stateless_call(
                trainable, seeds, rows, attention_adder, layout=layout, training=True)
            return rows, probs, seeds
        self.layer_call = layer_call

    @staticmethod
    def trains_all_weights(layer):
        """Whether every weight of `layer` is trainable: a layer partly or wholly frozen is
        called as itself, so that its frozen weights are not assigned back at every step."""
        return not layer.non_trainable_weights

    def __call__(self, layer, rows):
        # Read in the variables' own dtype (the encoder does not autocast); the traced
        # call casts them as the layer's own call does.
        rows, probs, seeds = self.layer_call(
            [tf.convert_to_tensor(variable) for variable in layer.trainable_variables],
            [tf.convert_to_tensor(variable) for variable in layer.non_trainable_variables],
            rows)
        for variable, value in zip(layer.non_trainable_variables, seeds):
            variable.assign(value)
        return rows, probs


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
