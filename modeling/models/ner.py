"""A per-token classifier on BERT's final hidden states, as the paper fine-tunes NER (no CRF).

Shape legend: B batch, T sequence length, H hidden size, L labels.
"""
import keras
import tensorflow as tf

from modeling import heads
from modeling.encoder import layers
from modeling.encoder.bert_model import POOLER, BertModel
from modeling.encoder.config import BertConfig


@keras.saving.register_keras_serializable(package="bert")
class BertTokenClassifier(keras.Model):
    """Owns `bert/...` plus `output_weights` [L, H] and `output_bias` [L] at the root.

    Called with the `BertModel` inputs; returns `logits` and `log_probabilities` float32
    [B, T, L] and `predictions` int32 [B, T]. Given `label_ids` int [B, T] and `label_weights`
    float [B, T] (1 at each word's first sub-token, 0 elsewhere: the paper's `X` positions
    and padding carry no loss) it adds `per_token_loss` [B, T] (weights applied) and `loss`,
    Σ weighted losses / Σ weights.
    """
    # A pre-trained checkpoint has no head. The pooler feeds nothing here: Hugging Face's
    # token classifiers have none, and it gets no update.
    OPTIONAL_VARIABLES = ("output_weights", "output_bias") + POOLER
    UNTRAINED_PREFIXES = ("bert/pooler/",)

    def __init__(self, config, num_labels, **kwargs):
        kwargs.setdefault("name", "bert_token_classifier")
        super().__init__(**kwargs)
        self.config = BertConfig.coerce(config)
        self.num_labels = num_labels
        self.bert = BertModel(self.config)
        self.dropout = layers.Dropout(heads.HEAD_DROPOUT_PROB)
        # The original release has no NER head. Drawn as its classifier's (a truncated normal
        # of 0.02, whose spread is 0.0176), it cost CoNLL-2003 about a point of dev F1 against
        # a normal of 0.02, the head of Hugging Face's token classifiers, in runs paired by
        # seed (benchmarks/history/finetuning_against_peer.md).
        self.output_weights, self.output_bias = layers.root_output_variables(
            self.config, num_labels,
            weights_initializer=keras.initializers.RandomNormal(
                stddev=self.config.initializer_range))
        self.built = True

    def call(self, inputs, training=False):
        model_inputs = {k: v for k, v in inputs.items()
                        if k in ("input_ids", "input_mask", "token_type_ids")}
        # Training reads no padding (its weights are 0): it is not computed.
        hidden = (self.bert.real_token_output(model_inputs, training=True) if training
                  else self.bert(model_inputs)["sequence_output"])
        hidden = self.dropout(hidden, training=training)
        rows = tf.reshape(hidden, [-1, self.config.hidden_size])  # [B*T, H]
        logits = heads.output_logits(rows, self.output_weights, self.output_bias)  # [B*T, L]
        logits = tf.reshape(logits, tf.concat([tf.shape(hidden)[:2], [self.num_labels]], 0))
        log_probs = tf.nn.log_softmax(logits, axis=-1)
        outputs = {"logits": logits, "log_probabilities": log_probs,
                   "predictions": tf.argmax(logits, axis=-1, output_type=tf.int32)}
        if "label_ids" in inputs:
            loss, per_token = heads.token_classification_loss(
                log_probs, inputs["label_ids"], inputs["label_weights"])
            outputs.update(per_token_loss=per_token, loss=loss)
        return outputs

    def get_config(self):
        return {"config": self.config.to_dict(), "num_labels": self.num_labels,
                "name": self.name}
