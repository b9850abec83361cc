"""Fine-tuning and predicting a `BertSpanModel` as the original `run_squad.py`, on any
`tf.distribute` strategy: its input pipeline, loss and raw results."""
import tensorflow as tf

from modeling import heads
from modeling.data import squad as squad_data
from modeling.models.squad import BertSpanModel
from modeling.training import input_pipeline
from modeling.training.trainer import Trainer


class SquadTrainer(Trainer):
    """Trains `BertSpanModel`: the mean of the start and end cross-entropies over the global
    batch; the span head starts random unless the checkpoint has it."""
    METRICS = ("loss", "examples")

    def build_model(self, config):
        return BertSpanModel(config)

    def replica_loss(self, outputs, batch, global_batch):
        loss, per_example = heads.span_loss(outputs["start_logits"], outputs["end_logits"],
                                            batch["start_positions"], batch["end_positions"],
                                            global_batch)
        return loss, {
            "examples": tf.cast(tf.shape(per_example)[0], tf.float32)}


def squad_dataset(path, batch_size, max_seq_length, is_training, seed=12345, skip_batches=0):
    """Batches of `data.squad.FeatureWriter` records, keyed as `BertSpanModel`'s inputs (see
    `input_pipeline.record_batches`); `unique_ids` stay int64."""
    def to_inputs(features):
        unique_ids = features.pop("unique_ids")
        return dict(input_pipeline.int32_inputs(features), unique_ids=unique_ids)
    spec = input_pipeline.parse_spec(squad_data.record_schema(is_training),
                                     max_seq_length=max_seq_length)
    return input_pipeline.record_batches(path, spec, to_inputs, batch_size, is_training,
                                         seed=seed, skip_batches=skip_batches)


def predict_logits(trainer, dataset):
    """(unique_ids [N] int64, start_logits [N, T], end_logits [N, T]) in input order."""
    outputs = trainer.predict(dataset, ["unique_ids", "start_logits", "end_logits"])
    return outputs["unique_ids"], outputs["start_logits"], outputs["end_logits"]
