"""The original `run_pretraining.py` model, BERT with the masked-LM and next-sentence heads,
and the two of the paper's Table 5 ablations: the masked LM alone ("No NSP") and a
left-to-right language model ("LTR & No NSP").

Shape legend: B batch, T sequence length, P masked positions per sequence, H hidden size,
V vocabulary size.
"""
import keras
import tensorflow as tf

from modeling.encoder.bert_model import POOLER, BertModel
from modeling.encoder.config import BertConfig
from modeling.heads import (MaskedLMHead, NextSentenceHead, classification_loss,
                            gather_positions, masked_lm_loss)


@keras.saving.register_keras_serializable(package="bert")
class BertPretrainer(keras.Model):
    """`BertModel` plus the masked-LM and next-sentence heads, as `run_pretraining.py` builds.

    Called with the `BertModel` inputs plus `masked_lm_positions` int [B, P]; returns the
    encoder's dict (in training only its `pooled_output`: the rest is not computed) plus
    `masked_lm_log_probs` [B, P, V] and `next_sentence_log_probs` [B, 2].
    When `masked_lm_ids`, `masked_lm_weights` and `next_sentence_labels` are given too, it adds
    `masked_lm_loss`, `masked_lm_example_loss` [B, P], `next_sentence_loss`,
    `next_sentence_example_loss` [B] and `total_loss` (their sum).
    """

    LABELS = ("masked_lm_ids", "masked_lm_weights", "next_sentence_labels")
    # A converted Hugging Face masked-LM model has neither pooler nor next-sentence head;
    # they start at random, as transformers starts them in BertForPreTraining.
    OPTIONAL_VARIABLES = POOLER + ("cls/seq_relationship/output_weights",
                                   "cls/seq_relationship/output_bias")
    UNTRAINED_PREFIXES = ()

    def __init__(self, config, **kwargs):
        kwargs.setdefault("name", "bert_pretrainer")
        super().__init__(**kwargs)
        self.config = BertConfig.coerce(config)
        self.bert = BertModel(self.config)
        self.masked_lm = MaskedLMHead(self.config, self.bert.get_embedding_table())
        self.next_sentence = NextSentenceHead(self.config)
        self.built = True  # every part built its weights when it was created

    def call(self, inputs, training=False):
        model_inputs = {k: v for k, v in inputs.items() if k in
                        ("input_ids", "input_mask", "token_type_ids")}
        positions = tf.cast(inputs["masked_lm_positions"], tf.int32)  # [B, P]
        if training:
            # The heads read the first token and the masked positions, and nothing else: the
            # last layer computes only those (and no layer the padding).
            first_and_masked = tf.concat([tf.zeros_like(positions[:, :1]), positions], axis=1)
            hidden = self.bert.real_token_output(model_inputs, first_and_masked, training=True)
            outputs = {"pooled_output": self.bert.pooler(hidden)}  # hidden: [B, 1+P, H]
            masked_hidden = hidden[:, 1:]
        else:
            outputs = dict(self.bert(model_inputs))
            masked_hidden = gather_positions(outputs["sequence_output"], positions)
        outputs["masked_lm_log_probs"] = self.masked_lm(masked_hidden)
        outputs["next_sentence_log_probs"] = self.next_sentence(outputs["pooled_output"])
        present = [name for name in self.LABELS if name in inputs]
        if present and len(present) != len(self.LABELS):
            raise ValueError(f"BertPretrainer needs all of {self.LABELS} to compute losses, "
                             f"got only {present}")
        if present:
            mlm, mlm_example = masked_lm_loss(outputs["masked_lm_log_probs"],
                                              inputs["masked_lm_ids"], inputs["masked_lm_weights"])
            nsp, nsp_example = classification_loss(outputs["next_sentence_log_probs"],
                                                   inputs["next_sentence_labels"])
            outputs.update(masked_lm_loss=mlm, masked_lm_example_loss=mlm_example,
                           next_sentence_loss=nsp, next_sentence_example_loss=nsp_example,
                           total_loss=mlm + nsp)
        return outputs

    def get_config(self):
        return {"config": self.config.to_dict(), "name": self.name}


_ENCODER_INPUTS = ("input_ids", "input_mask", "token_type_ids")


@keras.saving.register_keras_serializable(package="bert")
class BertMaskedLM(keras.Model):
    """`BertModel` plus the masked-LM head alone: the paper's "No NSP" model.

    Called with the `BertModel` inputs plus `masked_lm_positions` int [B, P]; returns
    `masked_lm_log_probs` [B, P, V] (and, out of training, the encoder's dict). With
    `masked_lm_ids` and `masked_lm_weights` it adds `masked_lm_loss`, `masked_lm_example_loss`
    [B, P] and `total_loss`. No loss reaches the pooler, which keeps its initial values.
    """

    LABELS = ("masked_lm_ids", "masked_lm_weights")
    OPTIONAL_VARIABLES = POOLER
    UNTRAINED_PREFIXES = ("bert/pooler/",)

    def __init__(self, config, **kwargs):
        kwargs.setdefault("name", "bert_masked_lm")
        super().__init__(**kwargs)
        self.config = BertConfig.coerce(config)
        self.bert = BertModel(self.config)
        self.masked_lm = MaskedLMHead(self.config, self.bert.get_embedding_table())
        self.built = True

    def call(self, inputs, training=False):
        model_inputs = {k: v for k, v in inputs.items() if k in _ENCODER_INPUTS}
        positions = tf.cast(inputs["masked_lm_positions"], tf.int32)  # [B, P]
        if training:  # the last layer computes the masked positions alone
            outputs = {}
            masked_hidden = self.bert.real_token_output(model_inputs, positions, training=True)
        else:
            outputs = dict(self.bert(model_inputs))
            masked_hidden = gather_positions(outputs["sequence_output"], positions)
        outputs["masked_lm_log_probs"] = self.masked_lm(masked_hidden)  # [B, P, V]
        if _labels_present(self.LABELS, inputs):
            loss, example_loss = masked_lm_loss(outputs["masked_lm_log_probs"],
                                                inputs["masked_lm_ids"],
                                                inputs["masked_lm_weights"])
            outputs.update(masked_lm_loss=loss, masked_lm_example_loss=example_loss,
                           total_loss=loss)
        return outputs

    def get_config(self):
        return {"config": self.config.to_dict(), "name": self.name}


def next_token_labels(inputs):
    """What a left-to-right model predicts at each position but the last: the next token,
    weighted 1 where it is a real one.

    Args:
      inputs: dict with `input_ids` and `input_mask`, int [B, T].

    Returns:
      (int32 ids [B, T-1], float32 weights [B, T-1]).
    """
    ids = tf.cast(inputs["input_ids"], tf.int32)[:, 1:]
    return ids, tf.cast(inputs["input_mask"], tf.float32)[:, 1:]


@keras.saving.register_keras_serializable(package="bert")
class BertLeftToRightLM(keras.Model):
    """A `BertModel` with `causal_attention` plus the masked-LM head read at every position to
    predict the next token: the paper's "LTR & No NSP" model, like OpenAI GPT in BERT's
    architecture and variable names.

    Called with `input_ids` and `input_mask` (and optionally `token_type_ids`); returns
    `next_token_log_probs` [B, T-1, V], at position t the distribution of token t+1 (and, out
    of training, the encoder's dict), `next_token_loss` (the mean over the real next tokens),
    `next_token_example_loss` [B, T-1] and `total_loss`.
    """

    OPTIONAL_VARIABLES = POOLER
    UNTRAINED_PREFIXES = ("bert/pooler/",)

    def __init__(self, config, **kwargs):
        kwargs.setdefault("name", "bert_left_to_right_lm")
        super().__init__(**kwargs)
        self.config = BertConfig.coerce(config)
        if not self.config.causal_attention:
            raise ValueError("a left-to-right model needs a config with causal_attention: "
                             "true, or every position would see the token it predicts")
        self.bert = BertModel(self.config)
        self.masked_lm = MaskedLMHead(self.config, self.bert.get_embedding_table())
        self.built = True

    def call(self, inputs, training=False):
        model_inputs = {k: v for k, v in inputs.items() if k in _ENCODER_INPUTS}
        if training:  # padding computed by no layer (zeros, of weight 0 below)
            outputs = {}
            hidden = self.bert.real_token_output(model_inputs, training=True)
        else:
            outputs = dict(self.bert(model_inputs))
            hidden = outputs["sequence_output"]  # [B, T, H]
        outputs["next_token_log_probs"] = self.masked_lm(hidden[:, :-1])  # [B, T-1, V]
        ids, weights = next_token_labels(inputs)
        loss, example_loss = masked_lm_loss(outputs["next_token_log_probs"], ids, weights)
        outputs.update(next_token_loss=loss, next_token_example_loss=example_loss,
                       total_loss=loss)
        return outputs

    def get_config(self):
        return {"config": self.config.to_dict(), "name": self.name}


def _labels_present(labels, inputs):
    present = [name for name in labels if name in inputs]
    if present and len(present) != len(labels):
        raise ValueError(f"the model needs all of {labels} to compute losses, "
                         f"got only {present}")
    return bool(present)
