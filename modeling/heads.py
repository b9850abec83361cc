"""Every head of the original scripts and its loss, each defined once.

The pre-training heads (masked LM, next sentence) and SQuAD's span head are layers under the
`cls` scope. The fine-tuning heads of run_classifier (and the paper's token classifier and
multiple choice) own root-level `output_weights`/`output_bias` that their models create
(`layers.root_output_variables`); they are applied by `output_logits` here.

Each loss returns (loss, per-example loss). Its optional normalizer is the count over the
*global* batch, which a `Trainer` passes so that N replicas compute one device's loss; without
it the loss is over the batch given, as the models report it.

Shape legend: B batch, T sequence length, P masked positions per sequence, H hidden size,
V vocabulary size, C choices, L labels.
"""
import keras
import tensorflow as tf

from modeling.encoder import layers

# The original's dropout on a fine-tuning head's input, whatever the config says. Read when a
# model is built, so that a test may set it to 0 first.
HEAD_DROPOUT_PROB = 0.1
MASKED_LM_LOSS_EPSILON = 1e-5  # the original adds it to Σweights so that all-padding is 0/ε


def one_hot_nll(log_probs, labels):
    """The negative log-likelihood of each label, as the original writes it (one-hot · log p).

    Args:
      log_probs: float32 Tensor [..., N].
      labels: int Tensor [...], indices into N.

    Returns:
      float32 Tensor [...].
    """
    one_hot = tf.one_hot(tf.cast(labels, tf.int32), tf.shape(log_probs)[-1], dtype=tf.float32)
    return -tf.reduce_sum(one_hot * log_probs, axis=-1)


def mean_loss(per_example, global_batch=None):
    """Σ per-example losses / `global_batch`, or their mean over this batch without it."""
    if global_batch is None:
        return tf.reduce_mean(per_example)
    return tf.reduce_sum(per_example) / global_batch


def output_logits(rows, output_weights, output_bias):
    """A head's dense output: rows · output_weightsᵀ + output_bias.

    The matmul runs in the rows' dtype (bfloat16 or float16 under mixed precision), the bias
    add in float32.

    Args:
      rows: float Tensor [N, H].
      output_weights: float32 variable [out, H], the original's [out, in] layout.
      output_bias: float32 variable [out].

    Returns:
      float32 Tensor [N, out].
    """
    weights = tf.cast(output_weights, rows.dtype)
    return tf.cast(tf.matmul(rows, weights, transpose_b=True), tf.float32) + output_bias


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

    def call(self, masked_hidden):
        """Log-probabilities over the vocabulary at the masked positions.

        Args:
          masked_hidden: float Tensor [B, P, H], the encoder's output at the masked
            positions (`gather_positions`).

        Returns:
          float32 Tensor [B, P, V] (the original returns the same rows as [B*P, V]).
        """
        hidden = self.transform(masked_hidden)  # [B, P, H]
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
        return output_logits(rows, self.output_weights, self.output_bias)


@keras.saving.register_keras_serializable(package="bert")
class NextSentenceHead(ClsOutput):
    """Owns `cls/seq_relationship/output_weights` [2, H] and `output_bias` [2]."""

    def __init__(self, config, **kwargs):
        kwargs.setdefault("name", "seq_relationship")
        super().__init__(config, 2, **kwargs)

    def call(self, pooled_output):
        """Args: pooled_output float [B, H]. Returns float32 log-probabilities [B, 2]."""
        return tf.nn.log_softmax(self.logits(pooled_output), axis=-1)


def masked_lm_loss(log_probs, label_ids, label_weights, total_weight=None):
    """The original masked-LM loss: Σ w·nll / (Σ w + 1e-5).

    Args:
      log_probs: float32 Tensor [B, P, V].
      label_ids: int Tensor [B, P].
      label_weights: float Tensor [B, P], 1 for real predictions and 0 for padding slots.
      total_weight: optional float32 scalar, Σ w over the global batch; default this batch's.

    Returns:
      (loss, per_example_loss): float32 scalar and float32 [B, P] (padding slots included).
    """
    per_example_loss = one_hot_nll(log_probs, label_ids)
    label_weights = tf.cast(label_weights, tf.float32)
    numerator = tf.reduce_sum(label_weights * per_example_loss)
    if total_weight is None:
        total_weight = tf.reduce_sum(label_weights)
    return numerator / (total_weight + MASKED_LM_LOSS_EPSILON), per_example_loss


def classification_loss(log_probs, labels, global_batch=None):
    """Softmax cross-entropy, one class per example: the loss of the next-sentence head, of
    run_classifier's head and of multiple choice (the classes are the choices).

    Args:
      log_probs: float32 Tensor [B, N].
      labels: int Tensor [B] or [B, 1].
      global_batch: optional float32 scalar, the number of examples in the global batch.

    Returns:
      (loss, per_example_loss): float32 scalar (the mean) and float32 [B].
    """
    per_example_loss = one_hot_nll(log_probs, tf.reshape(labels, [-1]))
    return mean_loss(per_example_loss, global_batch), per_example_loss


def regression_loss(predictions, labels, global_batch=None):
    """Squared error, run_classifier's loss for a regression task (STS-B).

    Args:
      predictions: float32 Tensor [B].
      labels: float Tensor [B].
      global_batch: optional float32 scalar, the number of examples in the global batch.

    Returns:
      (loss, per_example_loss): float32 scalar (the mean) and float32 [B].
    """
    per_example_loss = tf.square(predictions - tf.cast(labels, tf.float32))
    return mean_loss(per_example_loss, global_batch), per_example_loss


def token_classification_loss(log_probs, label_ids, label_weights, total_weight=None):
    """The token classifier's loss: Σ w·nll / max(Σ w, 1), the weights marking the tokens that
    carry a label (each word's first sub-token).

    Args:
      log_probs: float32 Tensor [B, T, L].
      label_ids: int Tensor [B, T].
      label_weights: float Tensor [B, T], 1 where a token is labelled, else 0.
      total_weight: optional float32 scalar, Σ w over the global batch; default this batch's.

    Returns:
      (loss, per_token_loss): float32 scalar and float32 [B, T], the weights applied.
    """
    label_weights = tf.cast(label_weights, tf.float32)
    per_token_loss = one_hot_nll(log_probs, label_ids) * label_weights
    if total_weight is None:
        total_weight = tf.reduce_sum(label_weights)
    return tf.reduce_sum(per_token_loss) / tf.maximum(total_weight, 1.0), per_token_loss


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


def span_loss(start_logits, end_logits, start_positions, end_positions, global_batch=None):
    """The original SQuAD loss: the mean of the start and end positions' cross-entropies.

    Args:
      start_logits, end_logits: float32 Tensor [B, T].
      start_positions, end_positions: int Tensor [B].
      global_batch: optional float32 scalar, the number of examples in the global batch.

    Returns:
      (loss, per_example_loss): float32 scalar (the mean) and float32 [B].
    """
    per_example_loss = (
        one_hot_nll(tf.nn.log_softmax(start_logits, axis=-1), start_positions)
        + one_hot_nll(tf.nn.log_softmax(end_logits, axis=-1), end_positions)) / 2.0
    return mean_loss(per_example_loss, global_batch), per_example_loss
