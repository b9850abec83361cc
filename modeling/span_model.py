"""The original `run_squad.py` model: BERT and a span head giving start and end logits.

Shape legend: B batch, T sequence length, H hidden size.
"""
import keras
import tensorflow as tf

from modeling import layers
from modeling.bert_model import BertModel
from modeling.config import BertConfig


@keras.saving.register_keras_serializable(package="bert")
class SquadHead(keras.layers.Layer):
    """Owns `cls/squad/output_weights` [2, H] and `cls/squad/output_bias` [2]."""

    def __init__(self, config, **kwargs):
        kwargs.setdefault("name", "squad")
        super().__init__(**kwargs)
        self.hidden_size = config.hidden_size
        self.initializer_range = config.initializer_range
        with keras.name_scope("cls"):
            self.build()

    def build(self, input_shape=None):
        # [out, in] as the original, applied with transpose_b, so checkpoints copy unchanged.
        self.output_weights = self.add_weight(
            name="output_weights", shape=(2, self.hidden_size),
            initializer=layers.initializer(self.initializer_range), autocast=False)
        self.output_bias = self.add_weight(name="output_bias", shape=(2,), initializer="zeros",
                                           autocast=False)

    def call(self, sequence_output):
        """Args: sequence_output float [B, T, H]. Returns float32 (start, end) logits [B, T]."""
        hidden = tf.shape(sequence_output)[-1]
        rows = tf.reshape(sequence_output, [-1, hidden])  # [B*T, H]
        weights = tf.cast(self.output_weights, rows.dtype)
        logits = tf.cast(tf.matmul(rows, weights, transpose_b=True), tf.float32)
        logits = tf.reshape(logits + self.output_bias, tf.concat(
            [tf.shape(sequence_output)[:2], [2]], axis=0))  # [B, T, 2]
        return logits[:, :, 0], logits[:, :, 1]


def span_loss(logits, positions):
    """Per-example negative log-likelihood of the positions: float32 [B] from [B, T] and [B]."""
    log_probs = tf.nn.log_softmax(logits, axis=-1)
    one_hot = tf.one_hot(tf.cast(positions, tf.int32), tf.shape(logits)[-1], dtype=tf.float32)
    return -tf.reduce_sum(one_hot * log_probs, axis=-1)


@keras.saving.register_keras_serializable(package="bert")
class BertSpanModel(keras.Model):
    """`BertModel` plus `SquadHead`, as `run_squad.py` builds.

    Called with the `BertModel` inputs; returns `start_logits` and `end_logits` float32 [B, T].
    Given `start_positions` and `end_positions` int [B] too, it adds `per_example_loss` [B]
    (the mean of the start and end cross-entropies) and `loss`, their batch mean.
    """

    def __init__(self, config, **kwargs):
        kwargs.setdefault("name", "bert_span_model")
        super().__init__(**kwargs)
        self.config = config if isinstance(config, BertConfig) else BertConfig.from_dict(config)
        self.bert = BertModel(self.config)
        self.squad = SquadHead(self.config)
        self.built = True

    def call(self, inputs, training=False):
        model_inputs = {k: v for k, v in inputs.items()
                        if k in ("input_ids", "input_mask", "token_type_ids")}
        sequence_output = self.bert(model_inputs, training=training)["sequence_output"]
        start_logits, end_logits = self.squad(sequence_output)
        outputs = {"start_logits": start_logits, "end_logits": end_logits}
        if "start_positions" in inputs:
            per_example = (span_loss(start_logits, inputs["start_positions"])
                           + span_loss(end_logits, inputs["end_positions"])) / 2.0
            outputs.update(per_example_loss=per_example, loss=tf.reduce_mean(per_example))
        return outputs

    def get_config(self):
        return {"config": self.config.to_dict(), "name": self.name}
