"""Fine-tuning a `BertTokenClassifier` (NER) on any `tf.distribute` strategy: the loss over
the global batch's labelled sub-tokens, the input pipeline, and per-token predictions."""
import tensorflow as tf

from modeling import heads
from modeling.data import ner as ner_data
from modeling.models.ner import BertTokenClassifier
from modeling.training import input_pipeline
from modeling.training.trainer import SUM, Trainer


class TokenClassifierTrainer(Trainer):
    """Trains `BertTokenClassifier`: cross-entropy at each word's first sub-token, divided by
    the number of such tokens in the global batch (so N replicas equal one device)."""
    METRICS = ("loss", "correct", "weight")

    def __init__(self, strategy, config, num_labels, *args, **kwargs):
        self.num_labels = num_labels
        super().__init__(strategy, config, *args, **kwargs)

    def build_model(self, config):
        return BertTokenClassifier(config, self.num_labels)

    def global_counts(self, batch):
        context = tf.distribute.get_replica_context()
        return (context.all_reduce(SUM, tf.reduce_sum(batch["label_weights"])),)

    def replica_loss(self, outputs, batch, global_weight):
        loss, _ = heads.token_classification_loss(
            outputs["log_probabilities"], batch["label_ids"], batch["label_weights"],
            global_weight)
        weights = tf.cast(batch["label_weights"], tf.float32)
        correct = tf.cast(tf.equal(outputs["predictions"],
                                   tf.cast(batch["label_ids"], tf.int32)), tf.float32)
        return loss, {"correct": tf.reduce_sum(correct * weights),
                      "weight": tf.reduce_sum(weights)}

    def loop_scalars(self, totals, steps):
        return {"loss": totals["loss"] / steps,
                "token_accuracy": totals["correct"] / max(totals["weight"], 1.0)}


def ner_dataset(path, batch_size, max_seq_length, is_training, seed=12345, skip_batches=0):
    """Batches of `data.ner.write_features` windows, keyed as `BertTokenClassifier`'s inputs
    (see `input_pipeline.record_batches`)."""
    spec = input_pipeline.parse_spec(ner_data.RECORD_SCHEMA, max_seq_length=max_seq_length)
    return input_pipeline.record_batches(path, spec, input_pipeline.int32_inputs, batch_size,
                                         is_training, seed=seed, skip_batches=skip_batches)


def predict_windows(trainer, dataset):
    """(predicted label ids [windows, T], Σ weighted loss, Σ weights) in input order."""
    outputs = trainer.predict(dataset, ["predictions", "per_token_loss", "label_weights"])
    return (outputs["predictions"], float(outputs["per_token_loss"].sum()),
            float(outputs["label_weights"].sum()))
