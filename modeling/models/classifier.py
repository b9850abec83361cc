"""The original `run_classifier.py` model: BERT, dropout on the pooled output, and one dense
output layer whose variables sit at the checkpoint's root (`output_weights`, `output_bias`)."""
import keras
import tensorflow as tf

from modeling.encoder import layers
from modeling.encoder.bert_model import BertModel
from modeling.encoder.config import BertConfig

HEAD_DROPOUT_PROB = 0.1  # the original's, on the pooled output, whatever the config says


@keras.saving.register_keras_serializable(package="bert")
class BertClassifier(keras.Model):
    """Owns `bert/...` plus `output_weights` [num_labels, H] and `output_bias` [num_labels].

    Called with the `BertModel` inputs; returns a dict with `logits` [B, num_labels] and, for
    classification, `probabilities` and `log_probabilities`; for regression (num_labels 1),
    `predictions` [B]. Given `label_ids` too, it adds `per_example_loss` and `loss` (softmax
    cross-entropy, or mean squared error for regression).
    """

    def __init__(self, config, num_labels, regression=False, **kwargs):
        kwargs.setdefault("name", "bert_classifier")
        super().__init__(**kwargs)
        self.config = config if isinstance(config, BertConfig) else BertConfig.from_dict(config)
        if regression and num_labels != 1:
            raise ValueError(f"a regression head has one output, got num_labels={num_labels}")
        self.num_labels, self.regression = num_labels, regression
        self.bert = BertModel(self.config)
        self.dropout = keras.layers.Dropout(HEAD_DROPOUT_PROB)
        # Created outside any layer's scope, so their paths are the original's root names;
        # stddev 0.02 as the original's, whatever the config's initializer_range.
        self.output_weights, self.output_bias = layers.root_output_variables(
            self.config, num_labels, stddev=0.02)
        self.built = True

    def call(self, inputs, training=False):
        model_inputs = {k: v for k, v in inputs.items()
                        if k in ("input_ids", "input_mask", "token_type_ids")}
        pooled = self.bert(model_inputs, training=training)["pooled_output"]
        pooled = self.dropout(pooled, training=training)
        weights = tf.cast(self.output_weights, pooled.dtype)
        logits = tf.cast(tf.matmul(pooled, weights, transpose_b=True), tf.float32)
        logits += self.output_bias
        outputs = {"logits": logits}
        if self.regression:
            outputs["predictions"] = logits[:, 0]
        else:
            outputs["probabilities"] = tf.nn.softmax(logits, axis=-1)
            outputs["log_probabilities"] = tf.nn.log_softmax(logits, axis=-1)
        if "label_ids" in inputs:
            labels = inputs["label_ids"]
            if self.regression:
                per_example = tf.square(outputs["predictions"] - tf.cast(labels, tf.float32))
            else:
                one_hot = tf.one_hot(tf.cast(labels, tf.int32), self.num_labels)
                per_example = -tf.reduce_sum(one_hot * outputs["log_probabilities"], axis=-1)
            outputs.update(per_example_loss=per_example, loss=tf.reduce_mean(per_example))
        return outputs

    def get_config(self):
        return {"config": self.config.to_dict(), "num_labels": self.num_labels,
                "regression": self.regression, "name": self.name}
