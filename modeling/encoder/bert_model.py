"""BertModel: the original `modeling.BertModel` as a Keras 3 model (TensorFlow backend)."""
import keras
import tensorflow as tf
from absl import logging

from modeling.encoder import layers, token_rows
from modeling.encoder.config import BertConfig

# The pooler's checkpoint names. Hugging Face's masked-LM, token-classification and
# question-answering models have no pooler, so checkpoints converted from them lack these.
POOLER = ("bert/pooler/dense/kernel", "bert/pooler/dense/bias")


@keras.saving.register_keras_serializable(package="bert")
class BertModel(keras.Model):
    """BERT encoder; every variable path is the original checkpoint name (`bert/...`).

    Called with a dict:
      input_ids: int32 [B, T], ids < vocab_size.
      input_mask: optional int32 [B, T], 1 for real tokens and 0 for padding (default all 1).
      token_type_ids: optional int32 [B, T], ids < type_vocab_size (default all 0).
    Returns a dict:
      embedding_output: float [B, T, H], after the embedding LayerNorm (and dropout).
      encoder_outputs: list of L float [B, T, H], the output of each layer.
      attention_probs: list of L float [B, N, T, T], each layer's attention probabilities.
      sequence_output: float [B, T, H], the last layer's output.
      pooled_output: float [B, H], tanh(dense(first token of sequence_output)); of its last
        real token with `causal_attention` (see `pooled_position`).
    Dropout is active only when called with `training=True`.
    """
    # What a checkpoint may lack (the loader then keeps the initial values; see
    # `name_based.load_original`), and the variable prefixes no output depends on (for a task
    # model: no gradient, so the trainer leaves them alone). Each model declares its own.
    OPTIONAL_VARIABLES = POOLER
    UNTRAINED_PREFIXES = ()

    def __init__(self, config, **kwargs):
        """Creates every weight at once (TruncatedNormal(initializer_range), as the original).

        Args:
          config: a `BertConfig`, or a dict of its fields (as `get_config` stores it).
        """
        kwargs.setdefault("name", "bert")
        super().__init__(**kwargs)
        self.config = BertConfig.coerce(config)
        self.embeddings = layers.BertEmbeddings(self.config)
        self.encoder = layers.Encoder(self.config)
        self.pooler = layers.Pooler(self.config)
        # [B, 1, 1, T] for every query alike, as the original; [B, 1, T, T] left to right.
        self.attention_adder = (layers.left_to_right_attention_adder
                                if self.config.causal_attention else layers.attention_adder)
        self.build()

    def build(self, input_shape=None):
        self.embeddings.build()
        self.encoder.build()
        self.pooler.build()

    def get_embedding_table(self):
        """The word-embedding variable, float32 [V, H]; the masked-LM head reuses it."""
        return self.embeddings.word_embeddings

    def call(self, inputs, training=False):
        layout, embedding_rows, encoder_rows, attention_probs = self._encode(
            inputs, token_rows.AllPositions, training)  # every position, as the original
        encoder_outputs = [layout.batch(rows) for rows in encoder_rows]
        sequence_output = encoder_outputs[-1]
        pooled_input = sequence_output  # the pooler reads its first token
        if self.config.causal_attention:
            pooled_input = tf.gather(sequence_output, self.pooled_position(inputs), batch_dims=1)
        return {
            "embedding_output": layout.batch(embedding_rows),
            "encoder_outputs": encoder_outputs,
            "attention_probs": attention_probs,
            "sequence_output": sequence_output,
            "pooled_output": self.pooler(pooled_input),
        }

    def pooled_position(self, inputs):
        """int32 [B, 1]: the position the pooler reads: the first token ([CLS]), or in a
        left-to-right model the last real one, the only one that has seen the whole input
        (as OpenAI GPT classifies from its last token)."""
        input_ids = tf.convert_to_tensor(inputs["input_ids"])
        if not self.config.causal_attention:
            return tf.zeros_like(input_ids[:, :1], tf.int32)
        input_mask = inputs.get("input_mask")
        if input_mask is None:
            input_mask = tf.ones_like(input_ids, tf.int32)
        lengths = tf.reduce_sum(tf.cast(input_mask, tf.int32), axis=1, keepdims=True)
        return tf.maximum(lengths - 1, 0)  # [B, 1]

    def real_token_output(self, inputs, positions=None, training=False):
        """The last layer's output where a head reads it, computing no padding: what a
        training step needs, in a fraction of `call`'s arithmetic.

        Every layer computes only the real tokens (`token_rows.RealTokens`; every position
        inside an XLA-compiled function), and with `positions` the last layer computes only
        those. The numbers at the real tokens are `call`'s.

        Args:
          inputs: as `call`'s.
          positions: optional int Tensor [B, P], positions of real tokens in each sequence.
          training: bool, enables dropout.

        Returns:
          float Tensor [B, P, H] at `positions`; without them [B, T, H], zeros at padding.
          `pooler` of a [B, P, H] whose first positions are 0 is the pooled output.
        """
        layout, _, encoder_rows, _ = self._encode(inputs, token_rows.for_input_mask, training,
                                                  positions)
        if positions is None:
            return layout.batch(encoder_rows[-1])
        return token_rows.AllPositions(positions).batch(encoder_rows[-1])

    def pooled_output(self, inputs, training=False):
        """The pooled output, float [B, H]: in training from `real_token_output` at the first
        token alone, otherwise from `call`, every position computed as the original."""
        if not training:
            return self(inputs)["pooled_output"]
        return self.pooler(self.real_token_output(inputs, self.pooled_position(inputs),
                                                  training=True))

    def _encode(self, inputs, layout_for, training, positions=None):
        """Embeddings and layers over the rows of `layout_for(input_mask)`.

        Returns:
          (layout, embedding rows [n, H], every layer's output rows, their attention
          probabilities); see `layers.Encoder` for `positions`.
        """
        input_ids, input_mask, token_type_ids = self._check_inputs(inputs)
        layout = layout_for(input_mask)
        embedding_rows = self.embeddings(input_ids, token_type_ids, layout=layout,
                                         training=training)
        attention_adder = self.attention_adder(input_mask, embedding_rows.dtype)
        encoder_rows, attention_probs = self.encoder(
            embedding_rows, attention_adder, layout=layout, training=training,
            positions=positions)
        return layout, embedding_rows, encoder_rows, attention_probs

    def _check_inputs(self, inputs):
        """Validates ranks, lengths and id ranges; fills in the optional inputs.

        Out-of-range ids would otherwise gather garbage on accelerators (the original's NaNs when
        the vocab file and the config disagree), so they raise here with the offending value.
        """
        if not isinstance(inputs, dict) or "input_ids" not in inputs:
            raise ValueError("BertModel expects a dict with 'input_ids' (and optionally "
                             f"'input_mask', 'token_type_ids'); got {type(inputs).__name__}")
        unknown = set(inputs) - {"input_ids", "input_mask", "token_type_ids"}
        if unknown:
            raise ValueError(f"BertModel got unknown inputs {sorted(unknown)}")
        input_ids = tf.convert_to_tensor(inputs["input_ids"])
        if input_ids.shape.rank != 2:
            raise ValueError(f"input_ids must have rank 2 [batch, seq_length], "
                             f"got shape {input_ids.shape}")
        seq_length = input_ids.shape[1]
        limit = self.config.max_position_embeddings
        if seq_length is not None and seq_length > limit:
            raise ValueError(f"sequence length {seq_length} exceeds max_position_embeddings "
                             f"{limit} of the config")
        input_ids = tf.cast(input_ids, tf.int32)
        checked = {"input_ids": input_ids}
        for name, default in (("input_mask", 1), ("token_type_ids", 0)):
            value = inputs.get(name)
            if value is None:
                value = tf.fill(tf.shape(input_ids), default)
            value = tf.cast(tf.convert_to_tensor(value), tf.int32)
            if value.shape.rank != 2 or not value.shape.is_compatible_with(input_ids.shape):
                raise ValueError(f"{name} must have the shape of input_ids {input_ids.shape}, "
                                 f"got {value.shape}")
            checked[name] = value
        assertions = _check_range(input_ids, self.config.vocab_size, "input_ids", "vocab_size")
        assertions += _check_range(checked["token_type_ids"], self.config.type_vocab_size,
                                   "token_type_ids", "type_vocab_size")
        assertions += _check_not_empty_rows(input_ids)
        if not tf.executing_eagerly():
            # Shapes left open when the graph was traced (a serving signature's [None, None])
            # are checked when it runs, so that a mask of another shape is not broadcast.
            if seq_length is None:
                assertions.append(tf.debugging.assert_less_equal(
                    tf.shape(input_ids)[1], limit,
                    message=f"sequence length exceeds max_position_embeddings {limit}"))
            for name in ("input_mask", "token_type_ids"):
                static = input_ids.shape.is_fully_defined() and checked[name].shape.is_fully_defined()
                if inputs.get(name) is not None and not static:
                    assertions.append(tf.debugging.Assert(
                        tf.reduce_all(tf.equal(tf.shape(checked[name]), tf.shape(input_ids))),
                        [f"{name} must have the shape of input_ids; got", tf.shape(checked[name]),
                         "and", tf.shape(input_ids)]))
        # Graph assertions must run before the lookups they protect (the positions' come from
        # the mask's shape).
        with tf.control_dependencies(assertions):
            return (tf.identity(input_ids), tf.identity(checked["input_mask"]),
                    tf.identity(checked["token_type_ids"]))

    def get_config(self):
        return {"config": self.config.to_dict(), "name": self.name}

    def load_weights(self, filepath, skip_mismatch=False, **kwargs):
        """Keras's `load_weights`, which also takes the file of a model that holds this
        encoder as its `bert` attribute, as `BertPretrainer` does: the encoder is loaded and
        the rest (the `cls/` heads) left out.

        `convert_checkpoint.py` writes Google's checkpoints, which carry the pre-training
        heads, as `BertPretrainer` files; this loads the bare encoder from them.

        Raises:
          ValueError: the file holds neither a `BertModel` of this config nor one as `bert`;
            with Keras's message for each.
        """
        try:
            return super().load_weights(filepath, skip_mismatch=skip_mismatch, **kwargs)
        except ValueError as error:
            bare_error = error
        try:
            _EncoderHolder(self).load_weights(filepath, skip_mismatch=skip_mismatch, **kwargs)
        except ValueError as holder_error:
            raise ValueError(
                f"{filepath} does not fit this BertModel ({self.config.num_hidden_layers} "
                f"layers, hidden_size {self.config.hidden_size}, vocab_size "
                f"{self.config.vocab_size}).\nAs a BertModel's weights: {bare_error}\nAs the "
                f"encoder (bert) of a BertPretrainer's: {holder_error}") from None
        logging.info("%s: loaded the encoder (bert/...) of a model with heads; the heads are "
                     "not used", filepath)


def _check_not_empty_rows(input_ids):
    """Checks that rows have at least one token (the pooler reads the first); an empty batch,
    [0, T] with any T, is fine and gives empty outputs.

    Eagerly it raises a ValueError at once; in a graph it returns the assertion op.
    """
    if tf.executing_eagerly():
        batch, seq_length = input_ids.shape
        if batch and seq_length == 0:
            raise ValueError(f"input_ids of shape {input_ids.shape} has rows without tokens")
        return []
    batch, seq_length = tf.shape(input_ids)[0], tf.shape(input_ids)[1]
    return [tf.debugging.Assert((seq_length > 0) | (batch == 0),
                                ["input_ids has rows without tokens, shape", tf.shape(input_ids)])]


def _check_range(ids, limit, name, field):
    """Checks that every id is in [0, limit).

    Eagerly it raises a ValueError at once; in a graph it returns the assertion ops, which fail
    with an InvalidArgumentError when run.
    """
    if tf.executing_eagerly():
        if tf.size(ids) > 0:
            low, high = int(tf.reduce_min(ids)), int(tf.reduce_max(ids))
            if low < 0 or high >= limit:
                bad = low if low < 0 else high
                raise ValueError(
                    f"{name} contains {bad}, outside [0, {field}={limit}) of the config")
        return []
    return [
        tf.debugging.assert_non_negative(ids, message=f"{name} contains a negative id"),
        tf.debugging.assert_less(ids, limit,
                                 message=f"{name} contains an id >= {field}={limit} of the config"),
    ]


class _EncoderHolder(keras.Model):
    """A model whose only part is `bert`, as a `BertPretrainer`'s or a task model's encoder
    is saved: loading a file into it fills the encoder and reads nothing else."""

    def __init__(self, bert):
        super().__init__(name="encoder_holder")
        self.bert = bert
        self.built = True
