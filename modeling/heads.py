"""The pre-training heads of the original `run_pretraining.py`, their losses, and BertPretrainer.

Shape legend: B batch, T sequence length, P masked positions per sequence, H hidden size,
V vocabulary size.
"""
import keras
import tensorflow as tf

from modeling.encoder import layers

MASKED_LM_LOSS_EPSILON = 1e-5  # the original adds it to Σweights so that all-padding is 0/ε


def gather_positions(sequence_output, positions):
    """Gathers the hidden states at `positions` of each sequence.

    Args:
      sequence_output: float Tensor [B, T, H].
      positions: int Tensor [B, P], indices into T.

    Returns:
      float Tensor [B, P, H].
    """
    return tf.gather(sequence_output, tf.cast(positions, tf.int32), batch_dims=1)


class MaskedLMTransform(keras.layers.Layer):
    """Owns `transform/dense/{kernel,bias}` and `transform/LayerNorm/{gamma,beta}`."""

    def __init__(self, config, **kwargs):
        super().__init__(name="transform", **kwargs)
        self.dense = layers.dense(config.hidden_size, config, "dense",
                                  activation=layers.get_activation(config.hidden_act))
        self.layer_norm = layers.layer_norm(config)
        self.hidden_size = config.hidden_size

    def build(self, input_shape=None):
        self.dense.build((None, None, self.hidden_size))
        self.layer_norm.build((None, None, self.hidden_size))

    def call(self, hidden_states):
        return self.layer_norm(self.dense(hidden_states))


@keras.saving.register_keras_serializable(package="bert")
class MaskedLMHead(keras.layers.Layer):
    """Owns `cls/predictions/transform/*` and `cls/predictions/output_bias` [V].

    The output projection is the encoder's word-embedding table [V, H], shared, not copied.
    """

    def __init__(self, config, embedding_table, **kwargs):
        """Args: config, a `BertConfig`; embedding_table, the float32 [V, H] variable to tie."""
        kwargs.setdefault("name", "predictions")
        super().__init__(**kwargs)
        self.vocab_size = config.vocab_size
        self.embedding_table = embedding_table
        self.transform = MaskedLMTransform(config)
        with keras.name_scope("cls"):
            self.build()

    def build(self, input_shape=None):
        self.transform.build()
        self.output_bias = self.add_weight(name="output_bias", shape=(self.vocab_size,),
                                           initializer="zeros", autocast=False)

    def call(self, sequence_output, positions):
        """Log-probabilities over the vocabulary at the masked positions.

        Args:
          sequence_output: float Tensor [B, T, H].
          positions: int Tensor [B, P].

        Returns:
          float32 Tensor [B, P, V] (the original returns the same rows as [B*P, V]).
        """
        hidden = self.transform(gather_positions(sequence_output, positions))  # [B, P, H]
        table = tf.cast(self.embedding_table, hidden.dtype)
        logits = tf.matmul(hidden, table, transpose_b=True)  # [B, P, V]
        logits = tf.cast(logits, tf.float32) + self.output_bias
        return tf.nn.log_softmax(logits, axis=-1)


class ClsOutput(keras.layers.Layer):
    """Owns `cls/<name>/output_weights` [units, H] and `cls/<name>/output_bias` [units]: the
    original's small output layers under the `cls` scope (next sentence, SQuAD)."""

    def __init__(self, config, units, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.hidden_size = config.hidden_size
        self.initializer_range = config.initializer_range
        with keras.name_scope("cls"):
            self.build()

    def build(self, input_shape=None):
        # [out, in] as the original, applied with transpose_b, so checkpoints copy unchanged.
        self.output_weights = self.add_weight(
            name="output_weights", shape=(self.units, self.hidden_size),
            initializer=layers.initializer(self.initializer_range), autocast=False)
        self.output_bias = self.add_weight(name="output_bias", shape=(self.units,),
                                           initializer="zeros", autocast=False)

    def logits(self, rows):
        """float [N, H] -> float32 [N, units]."""
        weights = tf.cast(self.output_weights, rows.dtype)
        return tf.cast(tf.matmul(rows, weights, transpose_b=True), tf.float32) + self.output_bias


@keras.saving.register_keras_serializable(package="bert")
class NextSentenceHead(ClsOutput):
    """Owns `cls/seq_relationship/output_weights` [2, H] and `output_bias` [2]."""

    def __init__(self, config, **kwargs):
        kwargs.setdefault("name", "seq_relationship")
        super().__init__(config, 2, **kwargs)

    def call(self, pooled_output):
        """Args: pooled_output float [B, H]. Returns float32 log-probabilities [B, 2]."""
        return tf.nn.log_softmax(self.logits(pooled_output), axis=-1)


def masked_lm_loss(log_probs, label_ids, label_weights):
    """The original masked-LM loss: Σ w·nll / (Σ w + 1e-5).

    Args:
      log_probs: float32 Tensor [B, P, V].
      label_ids: int Tensor [B, P].
      label_weights: float Tensor [B, P], 1 for real predictions and 0 for padding slots.

    Returns:
      (loss, per_example_loss): float32 scalar and float32 [B, P] (padding slots included).
    """
    one_hot = tf.one_hot(tf.cast(label_ids, tf.int32), tf.shape(log_probs)[-1], dtype=tf.float32)
    per_example_loss = -tf.reduce_sum(log_probs * one_hot, axis=-1)
    label_weights = tf.cast(label_weights, tf.float32)
    numerator = tf.reduce_sum(label_weights * per_example_loss)
    denominator = tf.reduce_sum(label_weights) + MASKED_LM_LOSS_EPSILON
    return numerator / denominator, per_example_loss


def next_sentence_loss(log_probs, labels):
    """The original next-sentence loss: the mean negative log-likelihood.

    Args:
      log_probs: float32 Tensor [B, 2].
      labels: int Tensor [B] or [B, 1], 1 meaning "B is a random sentence".

    Returns:
      (loss, per_example_loss): float32 scalar and float32 [B].
    """
    labels = tf.reshape(tf.cast(labels, tf.int32), [-1])
    one_hot = tf.one_hot(labels, 2, dtype=tf.float32)
    per_example_loss = -tf.reduce_sum(one_hot * log_probs, axis=-1)
    return tf.reduce_mean(per_example_loss), per_example_loss


@keras.saving.register_keras_serializable(package="bert")
class SquadHead(ClsOutput):
    """Owns `cls/squad/output_weights` [2, H] and `cls/squad/output_bias` [2]."""

    def __init__(self, config, **kwargs):
        kwargs.setdefault("name", "squad")
        super().__init__(config, 2, **kwargs)

    def call(self, sequence_output):
        """Args: sequence_output float [B, T, H]. Returns float32 (start, end) logits [B, T]."""
        hidden = tf.shape(sequence_output)[-1]
        logits = self.logits(tf.reshape(sequence_output, [-1, hidden]))  # [B*T, 2]
        logits = tf.reshape(logits, tf.concat([tf.shape(sequence_output)[:2], [2]], axis=0))
        return logits[:, :, 0], logits[:, :, 1]  # [B, T] each


def span_loss(logits, positions):
    """Per-example negative log-likelihood of the positions: float32 [B] from [B, T] and [B]."""
    log_probs = tf.nn.log_softmax(logits, axis=-1)
    one_hot = tf.one_hot(tf.cast(positions, tf.int32), tf.shape(logits)[-1], dtype=tf.float32)
    return -tf.reduce_sum(one_hot * log_probs, axis=-1)
