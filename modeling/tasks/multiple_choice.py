"""Fine-tuning a `BertMultipleChoice` (SWAG) on any `tf.distribute` strategy: its loss, input
pipeline, metrics and output files."""
import os

import numpy as np
import tensorflow as tf
from absl import logging

from modeling import export, heads
from modeling.data import multiple_choice as multiple_choice_data
from modeling.evaluation import baseline
from modeling.models.multiple_choice import BertMultipleChoice
from modeling.runtime import files
from modeling.training import fine_tuning, input_pipeline


def swag_dataset(path, batch_size, max_seq_length, is_training, drop_remainder=False,
                 seed=12345, skip_batches=0, padding=None):
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
                                         drop_remainder, seed, skip_batches, padding)


def evaluate(trainer, dataset, what="eval", total=None):
    """Accuracy and mean loss over the real examples, and their probabilities [N, 4]."""
    outputs = trainer.predict(dataset, ["probabilities", "per_example_loss", "label_ids",
                                        "is_real_example"], what=what, total=total)
    real = outputs["is_real_example"].astype(bool)
    probabilities = outputs["probabilities"][real]
    accuracy = float(np.mean(np.argmax(probabilities, -1) == outputs["label_ids"][real])) \
        if real.any() else 0.0
    loss = float(outputs["per_example_loss"][real].mean()) if real.any() else 0.0
    return {"eval_accuracy": accuracy, "eval_loss": loss,
            "global_step": trainer.global_step}, probabilities


def against_guessing(results, labels):
    """The eval log's comparison of `results` (eval_accuracy) with always answering the most
    frequent right choice of `labels` ([N] int), and with choosing at random."""
    answer, share = baseline.majority(labels)
    return baseline.beside(results, {"eval_accuracy": [
        (f"always guessing the most frequent answer, {answer}", share),
        (f"one of {multiple_choice_data.NUM_CHOICES} at random",
         1 / multiple_choice_data.NUM_CHOICES)]})


class MultipleChoiceTask(fine_tuning.Task):
    """run_multiple_choice.py: SWAG's train.csv, val.csv and test.csv in `data_dir`; --do_eval
    writes eval_results.txt, --do_predict test_results.tsv (the probabilities of the choices).

    Trains a `BertMultipleChoice`: softmax cross-entropy over the choices, over the global
    batch; the scoring vector starts random unless the checkpoint has it.
    """
    METRICS = ("loss", "correct", "examples")

    def __init__(self, data_dir):
        self.data_dir = data_dir

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

    def _read(self, split, has_labels):
        path = os.path.join(self.data_dir, f"{split}.csv")
        files.check_input(path, "--data_dir", self.data_dir)
        return multiple_choice_data.read_swag(path, has_labels)

    def read(self, options, tokenizer):
        self.train = self._read("train", has_labels=True) if options.do_train else []
        fine_tuning.shuffle_training_examples(self.train, options.seed)
        self.dev = self._read("val", has_labels=True) if options.do_eval else []
        self.test = self._read("test", has_labels=False) if options.do_predict else []
        return len(self.train)

    def _records(self, context, examples, name, batch_size):
        """Writes the examples' records, padded to whole batches on TPUs, as the classifier;
        returns the path and the records' count."""
        if context.on_tpu:
            examples = examples + [multiple_choice_data.PaddingInputExample()] * (
                -len(examples) % batch_size)
        path = context.record_path(name)
        multiple_choice_data.write_features(examples, context.options.max_seq_length,
                                            context.tokenizer, path)
        return path, len(examples)

    def write_train_records(self, context, path):
        multiple_choice_data.write_features(self.train, context.options.max_seq_length,
                                            context.tokenizer, path)
        logging.info("Training on %d examples, batch %d", len(self.train),
                     context.options.train_batch_size)

    def train_dataset(self, context, path, skip_batches):
        options = context.options
        return swag_dataset(path, options.train_batch_size, options.max_seq_length,
                            is_training=True, seed=options.seed, skip_batches=skip_batches,
                            padding=context.padding)

    def _evaluate(self, context, examples, name, batch_size):
        path, count = self._records(context, examples, name, batch_size)
        return evaluate(context.trainer, swag_dataset(
            path, batch_size, context.options.max_seq_length, False,
            drop_remainder=context.on_tpu, padding=context.padding), name, count)

    def evaluate(self, context):
        results, _ = self._evaluate(context, self.dev, "eval", context.options.eval_batch_size)
        logging.info("Eval results: %s", results)
        if self.dev:
            logging.info("Eval: %s", against_guessing(results, [e.label for e in self.dev]))
        context.write_eval_results(results)

    def predict(self, context):
        _, probabilities = self._evaluate(context, self.test, "predict",
                                          context.options.predict_batch_size)
        if context.chief:
            multiple_choice_data.write_predictions(self.test, probabilities, os.path.join(
                context.options.output_dir, "test_results.tsv"))

    def export_module(self, context):
        options = context.options
        return export.MultipleChoiceExport(context.trainer.model, options.vocab_file,
                                           options.do_lower_case, options.max_seq_length)
