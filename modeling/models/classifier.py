"""The original `run_classifier.py` model: BERT, dropout on the pooled output, and one dense
output layer whose variables sit at the checkpoint's root (`output_weights`, `output_bias`)."""
import keras
import tensorflow as tf

from modeling import heads
from modeling.encoder import layers
from modeling.encoder.bert_model import POOLER, BertModel
from modeling.encoder.config import BertConfig


@keras.saving.register_keras_serializable(package="bert")
class BertClassifier(keras.Model):
    """Owns `bert/...` plus `output_weights` [num_labels, H] and `output_bias` [num_labels].

    Called with the `BertModel` inputs; returns a dict with `logits` [B, num_labels] and, for
    classification, `probabilities` and `log_probabilities`; for regression (num_labels 1),
    `predictions` [B]. Given `label_ids` too, it adds `per_example_loss` and `loss` (softmax
    cross-entropy, or mean squared error for regression).
    """
    # A pre-trained checkpoint has no head; one converted from Hugging Face's masked-LM model
    # has no pooler either (it starts at random, as transformers starts it).
    OPTIONAL_VARIABLES = ("output_weights", "output_bias") + POOLER
    UNTRAINED_PREFIXES = ()

    def __init__(self, config, num_labels, regression=False, **kwargs):
        kwargs.setdefault("name", "bert_classifier")
        super().__init__(**kwargs)
        self.config = BertConfig.coerce(config)
        if regression and num_labels != 1:
            raise ValueError(f"a regression head has one output, got num_labels={num_labels}")
        self.num_labels, self.regression = num_labels, regression
        self.bert = BertModel(self.config)
        self.dropout = layers.Dropout(heads.HEAD_DROPOUT_PROB)
        # Created outside any layer's scope, so their paths are the original's root names;
        # stddev 0.02 as the original's, whatever the config's initializer_range.
        self.output_weights, self.output_bias = layers.root_output_variables(
            self.config, num_labels, weights_initializer=layers.initializer(0.02))
        self.built = True

    def call(self, inputs, training=False):
        model_inputs = {k: v for k, v in inputs.items()
                        if k in ("input_ids", "input_mask", "token_type_ids")}
        pooled = self.dropout(self.bert.pooled_output(model_inputs, training=training),
                              training=training)
        logits = heads.output_logits(pooled, self.output_weights, self.output_bias)
        outputs = {"logits": logits}
        if self.regression:
            outputs["predictions"] = logits[:, 0]
        else:
            outputs["probabilities"] = tf.nn.softmax(logits, axis=-1)
            outputs["log_probabilities"] = tf.nn.log_softmax(logits, axis=-1)
        if "label_ids" in inputs:
            if self.regression:
                loss, per_example = heads.regression_loss(outputs["predictions"],
                                                          inputs["label_ids"])
            else:
                loss, per_example = heads.classification_loss(outputs["log_probabilities"],
                                                              inputs["label_ids"])
            outputs.update(per_example_loss=per_example, loss=loss)
        return outputs

    def get_config(self):
        return {"config": self.config.to_dict(), "num_labels": self.num_labels,
                "regression": self.regression, "name": self.name}
