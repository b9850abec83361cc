"""Fine-tuning and predicting a `BertSpanModel` as the original `run_squad.py`, on any
`tf.distribute` strategy: its input pipeline, loss and raw results."""
import tensorflow as tf

from modeling import heads
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


def feature_spec(max_seq_length, is_training):
    ints = tf.io.FixedLenFeature
    spec = {"unique_ids": ints([], tf.int64),
            "input_ids": ints([max_seq_length], tf.int64),
            "input_mask": ints([max_seq_length], tf.int64),
            "segment_ids": ints([max_seq_length], tf.int64)}
    if is_training:
        spec.update(start_positions=ints([], tf.int64), end_positions=ints([], tf.int64),
                    is_impossible=ints([], tf.int64))
    return spec


def squad_dataset(path, batch_size, max_seq_length, is_training, seed=12345, skip_batches=0):
    """Batches of `squad_data.FeatureWriter` records, keyed as `BertSpanModel`'s inputs (see
    `input_pipeline.record_batches`); `unique_ids` stay int64."""
    def to_inputs(features):
        unique_ids = features.pop("unique_ids")
        return dict(input_pipeline.int32_inputs(features), unique_ids=unique_ids)
    return input_pipeline.record_batches(path, feature_spec(max_seq_length, is_training),
                                     to_inputs, batch_size, is_training, seed=seed,
                                     skip_batches=skip_batches)


def predict_logits(trainer, dataset):
    """(unique_ids [N] int64, start_logits [N, T], end_logits [N, T]) in input order."""
    outputs = trainer.predict(dataset, ["unique_ids", "start_logits", "end_logits"])
    return outputs["unique_ids"], outputs["start_logits"], outputs["end_logits"]
