"""Fine-tuning and evaluating a `BertClassifier` as the original `run_classifier.py`, on any
`tf.distribute` strategy: its loss, input pipeline, metrics and output files; and, with
`DocumentClassifierTask`, single texts of any length read as windows."""
import os

import numpy as np
import tensorflow as tf
from absl import logging

from modeling import export, heads
from modeling.data import classifier as classifier_data, windows
from modeling.evaluation import baseline, glue
from modeling.models.classifier import BertClassifier
from modeling.runtime import files
from modeling.training import fine_tuning, input_pipeline
from modeling.training.options import require_choice


def classifier_dataset(path, batch_size, max_seq_length, regression, is_training,
                       drop_remainder=False, seed=12345, skip_batches=0, padding=None):
    """Batches of `data.classifier.write_features` records, keyed as `BertClassifier`'s
    inputs (see `input_pipeline.record_batches`)."""
    spec = input_pipeline.parse_spec(classifier_data.record_schema(regression),
                                     max_seq_length=max_seq_length)
    return input_pipeline.record_batches(path, spec, input_pipeline.int32_inputs, batch_size,
                                         is_training, drop_remainder, seed, skip_batches, padding)


def evaluate(trainer, dataset, batch_size, task_name, regression=False, total=None):
    """The original's eval results, plus the task's GLUE metric, over the real examples.

    Returns:
      dict: eval_accuracy (classification), eval_loss (mean per-example loss), global_step,
      loss (mean over batches of each batch's mean loss, as the Estimator's `loss`), and
      `glue.task_metrics` (F1, Matthews correlation, Pearson/Spearman).
    """
    score = "predictions" if regression else "logits"
    outputs = trainer.predict(dataset, ["per_example_loss", "label_ids", "is_real_example",
                                        score], what="eval", total=total)
    real = outputs["is_real_example"].astype(bool)
    if not real.any():
        raise ValueError("the evaluation set has no examples")
    losses = outputs["per_example_loss"].astype(np.float64)
    batch_means = [losses[start:start + batch_size][real[start:start + batch_size]].mean()
                   for start in range(0, len(losses), batch_size)
                   if real[start:start + batch_size].any()]
    labels = outputs["label_ids"][real]
    predictions = (outputs[score][real] if regression
                   else np.argmax(outputs[score][real], axis=-1))
    results = {"eval_loss": float(losses[real].mean()), "global_step": trainer.global_step,
               "loss": float(np.mean(batch_means))}
    if not regression:
        results["eval_accuracy"] = glue.accuracy(labels, predictions)
    results.update(glue.task_metrics(task_name, labels, predictions))
    return results


def against_majority(results, label_ids, labels, task_name):
    """The eval log's comparison of `results` with always answering the majority label of
    `label_ids` ([N] int class indices of `labels`), metric by metric (`baseline.beside`)."""
    guess, floor = glue.majority_metrics(task_name, label_ids)
    words = f"always guessing the majority label, {labels[guess]}"
    return baseline.beside(results, {metric: [(words, value)] for metric, value in floor.items()})


def document_probabilities(trainer, dataset, counts, aggregation, what="predict", total=None):
    """Per document, in input order: float64 [D, num_labels], its windows' logits aggregated
    (`windows.document_probabilities`); `counts` [D] are the documents' windows, which the
    dataset holds in order (then padding examples, if any)."""
    outputs = trainer.predict(dataset, ["logits", "is_real_example"], what=what, total=total)
    logits = outputs["logits"][outputs["is_real_example"].astype(bool)]
    return windows.document_probabilities(logits.reshape(len(logits), -1), counts, aggregation)


def document_metrics(probabilities, labels, batch_size, task_name, global_step):
    """The eval results of `evaluate`, over documents: eval_loss is the mean of each document's
    -log(probability of its label) and `loss` the mean over batches of `batch_size` documents
    of their mean."""
    probabilities, labels = np.asarray(probabilities), np.asarray(labels)
    if not len(labels):
        raise ValueError("the evaluation set has no documents")
    losses = -np.log(np.maximum(probabilities[np.arange(len(labels)), labels], 1e-30))
    predictions = np.argmax(probabilities, axis=-1)
    results = {"eval_loss": float(losses.mean()), "global_step": global_step,
               "loss": float(np.mean([losses[start:start + batch_size].mean()
                                      for start in range(0, len(losses), batch_size)])),
               "eval_accuracy": glue.accuracy(labels, predictions)}
    results.update(glue.task_metrics(task_name, labels, predictions))
    return results


def predict(trainer, dataset, num_labels, regression=False, total=None):
    """Per real example, in input order: the class probabilities [N, num_labels], or the
    regression predictions [N, 1]."""
    name = "predictions" if regression else "probabilities"
    outputs = trainer.predict(dataset, [name, "is_real_example"], total=total)
    values = outputs[name][outputs["is_real_example"].astype(bool)]
    if not len(values):  # an empty test set: no rows, but the right number of columns
        return np.zeros([0, 1 if regression else num_labels])
    return values.reshape(len(values), -1)


def write_test_results(values, path):
    """The original's test_results.tsv: one line per example, its values tab-separated."""
    with files.atomic_write(path) as writer:
        for row in values:
            writer.write("\t".join(str(value) for value in row) + "\n")


class ClassifierTask(fine_tuning.Task):
    """run_classifier.py: a GLUE task or XNLI from `data_dir`; MNLI is evaluated and predicted
    on its matched and mismatched halves, whose results carry a `_mismatched` suffix.

    Trains a `BertClassifier`: softmax cross-entropy (or squared error for regression) over
    the global batch; the head starts random unless the checkpoint has it.
    """
    METRICS = ("loss", "correct", "examples")

    def __init__(self, data_dir, task_name):
        self.data_dir, self.task_name = data_dir, task_name
        self.processor = classifier_data.get_processor(task_name)
        self.labels = self.processor.get_labels()
        self.regression = self.processor.is_regression
        self.num_labels = max(len(self.labels), 1)  # a regression's one output

    def build_model(self, config):
        return BertClassifier(config, self.num_labels, self.regression)

    def replica_loss(self, outputs, batch, global_batch):
        if self.regression:
            loss, per_example = heads.regression_loss(outputs["predictions"],
                                                      batch["label_ids"], global_batch)
            correct = tf.constant(0.0)
        else:
            loss, per_example = heads.classification_loss(outputs["log_probabilities"],
                                                          batch["label_ids"], global_batch)
            predictions = tf.argmax(outputs["logits"], -1, output_type=tf.int32)
            correct = tf.reduce_sum(tf.cast(
                tf.equal(predictions, tf.cast(batch["label_ids"], tf.int32)), tf.float32))
        return loss, {"correct": correct,
                      "examples": tf.cast(tf.shape(per_example)[0], tf.float32)}

    def loop_scalars(self, totals, steps):
        scalars = {"loss": totals["loss"] / steps}
        if not self.regression:
            scalars["accuracy"] = totals["correct"] / max(totals["examples"], 1)
        return scalars

    def _splits(self):
        """(suffix, processor) of each evaluated set."""
        processor = self.processor
        if isinstance(processor, classifier_data.MnliProcessor) and not isinstance(
                processor, classifier_data.MnliMismatchedProcessor):
            return [("", processor), ("_mismatched", classifier_data.MnliMismatchedProcessor())]
        return [("", processor)]

    def read(self, options, tokenizer):
        self.train = (self.processor.get_train_examples(self.data_dir)
                      if options.do_train else [])
        self.dev = {suffix: processor.get_dev_examples(self.data_dir)
                    for suffix, processor in self._splits()} if options.do_eval else {}
        self.test = {suffix: processor.get_test_examples(self.data_dir)
                     for suffix, processor in self._splits()} if options.do_predict else {}
        return len(self.train)

    def _records(self, context, examples, name, batch_size):
        """Writes the examples' records, padded with fake examples to whole batches on TPUs
        (which need fixed shapes), as the original; returns the path and the records' count."""
        if context.on_tpu:
            examples = examples + [classifier_data.PaddingInputExample()] * (
                -len(examples) % batch_size)
        path = context.record_path(name)
        classifier_data.write_features(examples, self.labels, context.options.max_seq_length,
                                       context.tokenizer, path)
        return path, len(examples)

    def _dataset(self, context, path, batch_size):
        return classifier_dataset(path, batch_size, context.options.max_seq_length,
                                  self.regression, is_training=False,
                                  drop_remainder=context.on_tpu, padding=context.padding)

    def write_train_records(self, context, path):
        options = context.options
        classifier_data.write_features(self.train, self.labels, options.max_seq_length,
                                       context.tokenizer, path)
        logging.info("Training on %d examples, batch %d", len(self.train),
                     options.train_batch_size)

    def train_dataset(self, context, path, skip_batches):
        options = context.options
        return classifier_dataset(path, options.train_batch_size, options.max_seq_length,
                                  self.regression, is_training=True,
                                  seed=options.seed, skip_batches=skip_batches,
                                  padding=context.padding)

    def evaluate(self, context):
        results = {}
        for suffix, examples in self.dev.items():
            split_results = self._evaluate_split(context, examples, f"eval{suffix}")
            logging.info("Eval results%s (%d examples): %s", suffix, len(examples),
                         split_results)
            if not self.regression:  # a constant score has no correlation
                logging.info("Eval%s: %s", suffix, against_majority(
                    split_results, self._label_ids(examples), self.labels, self.task_name))
            results.update({key if key == "global_step" else key + suffix: value
                            for key, value in split_results.items()})
        context.write_eval_results(results)

    def _label_ids(self, examples):
        """The class index of each example's label."""
        return [self.labels.index(example.label) for example in examples]

    def _evaluate_split(self, context, examples, name):
        batch_size = context.options.eval_batch_size
        path, count = self._records(context, examples, name, batch_size)
        return evaluate(context.trainer, self._dataset(context, path, batch_size), batch_size,
                        self.task_name, self.regression, count)

    def predict(self, context):
        for suffix, examples in self.test.items():
            values = self._predict_split(context, examples, f"predict{suffix}")
            if len(values) != len(examples):
                raise RuntimeError(f"{len(values)} predictions for {len(examples)} examples")
            if context.chief:
                write_test_results(values, os.path.join(context.options.output_dir,
                                                        f"test_results{suffix}.tsv"))

    def _predict_split(self, context, examples, name):
        batch_size = context.options.predict_batch_size
        path, count = self._records(context, examples, name, batch_size)
        return predict(context.trainer, self._dataset(context, path, batch_size),
                       self.num_labels, self.regression, count)

    def export_module(self, context):
        options = context.options
        return export.ClassifierExport(context.trainer.model, options.vocab_file,
                                       options.do_lower_case, options.max_seq_length,
                                       self.labels, self.processor.is_pair)


class DocumentClassifierTask(ClassifierTask):
    """run_classifier.py on single texts of any length (`classifier_data.document_features`).

    With `doc_stride`, each document is read as all its windows of max_seq_length - 2 pieces
    (`windows.spans`): training takes every window with its document's label (the windows of
    all documents shuffled together, as a document's would otherwise share batches), eval and
    predict aggregate a document's windows (`window_aggregation`, `windows.AGGREGATIONS`) into
    one prediction: one row of test_results.tsv and one example of the metrics per document.
    Without it, each document is one window cut by `truncation` ("head_tail": its first and
    last pieces, `windows.head_tail`). The export does the same from raw text.
    """
    TRAIN_UNITS = "training windows"

    def __init__(self, data_dir, task_name, doc_stride=None, window_aggregation=None,
                 truncation="head"):
        super().__init__(data_dir, task_name)
        self.doc_stride, self.truncation = doc_stride, truncation
        self.window_aggregation = window_aggregation
        self.aggregation = window_aggregation or "mean"

    def check(self, options, config):
        require_choice("truncation", self.truncation, windows.TRUNCATIONS)
        if self.window_aggregation is not None:
            require_choice("window_aggregation", self.window_aggregation, windows.AGGREGATIONS)
        asked = (f"--doc_stride={self.doc_stride}" if self.doc_stride is not None
                 else f"--truncation={self.truncation}" if self.truncation != "head"
                 else f"--window_aggregation={self.window_aggregation}")
        if self.processor.is_pair:
            raise ValueError(f"{asked} reads single texts, and {self.task_name} pairs two "
                             f"(text_b): no one rule says which window of one text goes with "
                             f"which of the other, or how two texts share a head and a tail")
        if self.regression:
            raise ValueError(f"{asked} reads classification tasks only, not the regression "
                             f"of {self.task_name}")
        if self.doc_stride is None:
            if self.window_aggregation is not None:
                raise ValueError(f"--window_aggregation={self.window_aggregation} needs "
                                 f"--doc_stride: without windows there is nothing to aggregate")
            return
        if self.truncation != "head":
            raise ValueError(f"--truncation={self.truncation} cuts each document to one "
                             f"window and --doc_stride={self.doc_stride} reads all of it in "
                             f"windows: choose one")
        windows.check_stride(self.doc_stride, options.max_seq_length - 2, "--doc_stride",
                             f"--max_seq_length={options.max_seq_length} less [CLS] and [SEP]")

    def read(self, options, tokenizer):
        super().read(options, tokenizer)

        def documents(examples):  # converted here: an empty document stops the run now
            return [classifier_data.document_features(
                example, self.labels, options.max_seq_length, tokenizer, self.doc_stride,
                self.truncation) for example in examples]
        self.train_documents = len(self.train)
        self.train = [window for document in documents(self.train) for window in document]
        fine_tuning.shuffle_training_examples(self.train, options.seed)
        self.dev = {suffix: documents(examples) for suffix, examples in self.dev.items()}
        self.test = {suffix: documents(examples) for suffix, examples in self.test.items()}
        return len(self.train)

    def write_train_records(self, context, path):
        options = context.options
        classifier_data.write_records(self.train, False, options.max_seq_length,
                                      len(context.tokenizer.vocab), path)
        logging.info("Training on %d documents (%d windows), batch %d", self.train_documents,
                     len(self.train), options.train_batch_size)

    def _probabilities(self, context, documents, name, batch_size, what):
        """[D, num_labels] probabilities of the documents (lists of window features)."""
        features = [window for document in documents for window in document]
        if context.on_tpu:  # fixed shapes: whole batches, as `_records`
            features += [classifier_data.convert_single_example(
                classifier_data.PaddingInputExample(), self.labels,
                context.options.max_seq_length, None)] * (-len(features) % batch_size)
        path = context.record_path(name)
        classifier_data.write_records(features, False, context.options.max_seq_length,
                                      len(context.tokenizer.vocab), path)
        logging.info("%s: %d documents in %d windows", name, len(documents),
                     sum(map(len, documents)))
        return document_probabilities(
            context.trainer, self._dataset(context, path, batch_size),
            [len(document) for document in documents], self.aggregation, what, len(features))

    def _label_ids(self, documents):
        return [document[0].label_id for document in documents]

    def _evaluate_split(self, context, documents, name):
        batch_size = context.options.eval_batch_size
        probabilities = self._probabilities(context, documents, name, batch_size, "eval")
        return document_metrics(probabilities, [document[0].label_id for document in documents],
                                batch_size, self.task_name, context.trainer.global_step)

    def _predict_split(self, context, documents, name):
        return self._probabilities(context, documents, name,
                                   context.options.predict_batch_size, "predict")

    def export_module(self, context):
        options = context.options
        if self.doc_stride is None:
            return export.ClassifierExport(context.trainer.model, options.vocab_file,
                                           options.do_lower_case, options.max_seq_length,
                                           self.labels, False, truncation=self.truncation)
        return export.DocumentClassifierExport(
            context.trainer.model, options.vocab_file, options.do_lower_case,
            options.max_seq_length, self.labels, self.doc_stride, self.aggregation)


def classifier_task(data_dir, task_name, doc_stride=None, window_aggregation=None,
                    truncation="head"):
    """run_classifier.py's task: the original's `ClassifierTask` unless one of the long-text
    options asks for a `DocumentClassifierTask` (which checks that they fit together)."""
    if doc_stride is None and window_aggregation is None and truncation == "head":
        return ClassifierTask(data_dir, task_name)
    return DocumentClassifierTask(data_dir, task_name, doc_stride, window_aggregation,
                                  truncation)
