"""The original `run_squad.py` model: BERT and a span head giving start and end logits.

Shape legend: B batch, T sequence length, H hidden size.
"""
import keras

from modeling.encoder.bert_model import POOLER, BertModel
from modeling.encoder.config import BertConfig
from modeling.heads import SquadHead, span_loss


@keras.saving.register_keras_serializable(package="bert")
class BertSpanModel(keras.Model):
    """`BertModel` plus `SquadHead`, as `run_squad.py` builds.

    Called with the `BertModel` inputs; returns `start_logits` and `end_logits` float32 [B, T].
    Given `start_positions` and `end_positions` int [B] too, it adds `per_example_loss` [B]
    (the mean of the start and end cross-entropies) and `loss`, their batch mean.
    """
    # A pre-trained checkpoint has no span head. The pooler feeds nothing here: Hugging Face's
    # question-answering models have none, and it gets no update.
    OPTIONAL_VARIABLES = ("cls/squad/output_weights", "cls/squad/output_bias") + POOLER
    UNTRAINED_PREFIXES = ("bert/pooler/",)

    def __init__(self, config, **kwargs):
        kwargs.setdefault("name", "bert_span_model")
        super().__init__(**kwargs)
        self.config = BertConfig.coerce(config)
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
            loss, per_example = span_loss(start_logits, end_logits, inputs["start_positions"],
                                          inputs["end_positions"])
            outputs.update(per_example_loss=per_example, loss=loss)
        return outputs

    def get_config(self):
        return {"config": self.config.to_dict(), "name": self.name}
