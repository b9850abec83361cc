"""The original `run_pretraining.py` model: BERT with the masked-LM and next-sentence heads.

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
        self.config = config if isinstance(config, BertConfig) else BertConfig.from_dict(config)
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
