"""Fine-tuning a `BertMultipleChoice` (SWAG) on any `tf.distribute` strategy."""
import numpy as np
import tensorflow as tf

from modeling import heads
from modeling.data import multiple_choice as multiple_choice_data
from modeling.models.multiple_choice import BertMultipleChoice
from modeling.training import input_pipeline
from modeling.training.trainer import Trainer


class MultipleChoiceTrainer(Trainer):
    """Trains `BertMultipleChoice`: softmax cross-entropy over the choices, over the global
    batch; the scoring vector starts random unless the checkpoint has it."""
    METRICS = ("loss", "correct", "examples")

    def build_model(self, config):
        return BertMultipleChoice(config)

    def replica_loss(self, outputs, batch, global_batch):
        loss, per_example = heads.classification_loss(outputs["log_probabilities"],
                                                      batch["label_ids"], global_batch)
        predictions = tf.argmax(outputs["logits"], -1, output_type=tf.int32)
        labels = tf.reshape(tf.cast(batch["label_ids"], tf.int32), [-1])
        return loss, {
            "correct": tf.reduce_sum(tf.cast(tf.equal(predictions, labels), tf.float32)),
            "examples": tf.cast(tf.shape(per_example)[0], tf.float32)}

    def loop_scalars(self, totals, steps):
        return {"loss": totals["loss"] / steps,
                "accuracy": totals["correct"] / max(totals["examples"], 1.0)}


def swag_dataset(path, batch_size, max_seq_length, is_training, drop_remainder=False,
                 seed=12345, skip_batches=0):
    """Batches of `data.multiple_choice.write_features` records: int32 [B, 4, T] model
    inputs, `label_ids` [B] and `is_real_example` [B] (see `input_pipeline.record_batches`)."""
    spec = input_pipeline.parse_spec(multiple_choice_data.RECORD_SCHEMA,
                                     max_seq_length=max_seq_length)

    def to_inputs(features):
        inputs = input_pipeline.int32_inputs(features)
        for name in ("label_ids", "is_real_example"):
            inputs[name] = inputs[name][:, 0]
        return inputs
    return input_pipeline.record_batches(path, spec, to_inputs, batch_size, is_training,
                                         drop_remainder, seed, skip_batches)


def evaluate(trainer, dataset):
    """Accuracy and mean loss over the real examples, and their probabilities [N, 4]."""
    outputs = trainer.predict(dataset, ["probabilities", "per_example_loss", "label_ids",
                                        "is_real_example"])
    real = outputs["is_real_example"].astype(bool)
    probabilities = outputs["probabilities"][real]
    accuracy = float(np.mean(np.argmax(probabilities, -1) == outputs["label_ids"][real])) \
        if real.any() else 0.0
    loss = float(outputs["per_example_loss"][real].mean()) if real.any() else 0.0
    return {"eval_accuracy": accuracy, "eval_loss": loss,
            "global_step": trainer.global_step}, probabilities
