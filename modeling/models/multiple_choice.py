"""Multiple choice as the paper fine-tunes SWAG: each (context, ending) pair is one sequence,
a single vector scores each pooled output, and a softmax runs over the choices.

Shape legend: B batch, C choices, T sequence length, H hidden size.
"""
import keras
import tensorflow as tf

from modeling import heads
from modeling.encoder import layers
from modeling.encoder.bert_model import POOLER, BertModel
from modeling.encoder.config import BertConfig


@keras.saving.register_keras_serializable(package="bert")
class BertMultipleChoice(keras.Model):
    """Owns `bert/...` plus `output_weights` [1, H] (the paper's vector V) and `output_bias`
    [1] at the root.

    Called with `input_ids`, `input_mask`, `token_type_ids` int [B, C, T]; returns `logits`,
    `probabilities` and `log_probabilities` float32 [B, C]. Given `label_ids` int [B] too, it
    adds `per_example_loss` [B] (softmax cross-entropy over the choices) and `loss`.
    """
    # A pre-trained checkpoint has no scoring vector; one converted from Hugging Face's
    # masked-LM model has no pooler either (it starts at random, as transformers starts it).
    OPTIONAL_VARIABLES = ("output_weights", "output_bias") + POOLER
    UNTRAINED_PREFIXES = ()

    def __init__(self, config, **kwargs):
        kwargs.setdefault("name", "bert_multiple_choice")
        super().__init__(**kwargs)
        self.config = BertConfig.coerce(config)
        self.bert = BertModel(self.config)
        self.dropout = layers.Dropout(heads.HEAD_DROPOUT_PROB)
        self.output_weights, self.output_bias = layers.root_output_variables(self.config, 1)
        self.built = True

    def call(self, inputs, training=False):
        shape = tf.shape(inputs["input_ids"])  # [B, C, T]
        flat = {name: tf.reshape(inputs[name], [-1, shape[2]])  # [B*C, T]
                for name in ("input_ids", "input_mask", "token_type_ids")}
        pooled = self.bert.pooled_output(flat, training=training)  # [B*C, H]
        pooled = self.dropout(pooled, training=training)
        scores = heads.output_logits(pooled, self.output_weights, self.output_bias)  # [B*C, 1]
        logits = tf.reshape(scores, shape[:2])  # [B, C]
        log_probs = tf.nn.log_softmax(logits, axis=-1)
        outputs = {"logits": logits, "probabilities": tf.exp(log_probs),
                   "log_probabilities": log_probs}
        if "label_ids" in inputs:
            loss, per_example = heads.classification_loss(log_probs, inputs["label_ids"])
            outputs.update(per_example_loss=per_example, loss=loss)
        return outputs

    def get_config(self):
        return {"config": self.config.to_dict(), "name": self.name}
