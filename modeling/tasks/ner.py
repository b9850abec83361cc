"""Fine-tuning a `BertTokenClassifier` (NER) on any `tf.distribute` strategy: the loss over
the global batch's labelled sub-tokens, the input pipeline, per-token predictions and the
output files."""
import os

import tensorflow as tf
from absl import logging

from modeling import export, heads
from modeling.data import ner as ner_data, windows
from modeling.evaluation import baseline, conlleval
from modeling.models.ner import BertTokenClassifier
from modeling.training import fine_tuning, input_pipeline
from modeling.training.objective import SUM


def ner_dataset(path, batch_size, max_seq_length, is_training, seed=12345, skip_batches=0,
                padding=None):
    """Batches of `data.ner.write_features` windows, keyed as `BertTokenClassifier`'s inputs
    (see `input_pipeline.record_batches`)."""
    spec = input_pipeline.parse_spec(ner_data.RECORD_SCHEMA, max_seq_length=max_seq_length)
    return input_pipeline.record_batches(path, spec, input_pipeline.int32_inputs, batch_size,
                                         is_training, seed=seed, skip_batches=skip_batches,
                                         padding=padding)


def against_majority_tag(results, gold_tags):
    """The eval log's comparison of `results` (eval_f1, eval_accuracy) with tagging every word
    with the most frequent gold tag: "O" on entity data, which finds no entity (F1 0)."""
    tag, _ = baseline.majority(tag for tags in gold_tags for tag in tags)
    guessed = conlleval.evaluate(gold_tags, [[tag] * len(tags) for tags in gold_tags])
    words = f"always guessing the majority tag, {tag}"
    return baseline.beside(results, {"eval_f1": [(words, guessed.overall.f1)],
                                     "eval_accuracy": [(words, guessed.accuracy)]})


def predict_windows(trainer, dataset, max_seq_length, what="predict", total=None):
    """(predicted label ids [windows, T], Σ weighted loss, Σ weights) in input order."""
    names = ["predictions", "per_token_loss", "label_weights"]
    outputs = trainer.predict(dataset, names, {name: max_seq_length for name in names},
                              what=what, total=total)
    return (outputs["predictions"], float(outputs["per_token_loss"].sum()),
            float(outputs["label_weights"].sum()))


class NerTask(fine_tuning.Task):
    """run_ner.py: CoNLL-2003-style files in `data_dir`. The tags come from the training file
    (read as IOB2 inside), also when only evaluating or exporting; outputs are written in the
    files' own scheme. --do_eval writes conlleval's entity-level scores to eval_results.txt and
    eval_predictions.txt; --do_predict writes test_predictions.txt.

    Trains a `BertTokenClassifier` of the training file's tags (`read` sets them):
    cross-entropy at each word's first sub-token, divided by the number of such tokens in the
    global batch (so N replicas equal one device).
    """
    CASE_MISMATCH_WARNS = True  # the paper's cased model is the usual mismatch
    TRAIN_UNITS = "training windows"
    METRICS = ("loss", "correct", "weight")

    def __init__(self, data_dir, tag_scheme="auto", doc_stride=None):
        """`doc_stride`: pieces from one window's start to the next (see `modeling.data.ner`);
        None for half a window."""
        self.data_dir, self.tag_scheme, self.doc_stride = data_dir, tag_scheme, doc_stride

    def build_model(self, config):
        return BertTokenClassifier(config, len(self.labels))

    def global_counts(self, batch):
        """The labelled sub-tokens of the global batch."""
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

    def check(self, options, config):
        if self.doc_stride is not None:
            windows.check_stride(self.doc_stride, options.max_seq_length - 2, "--doc_stride",
                                 f"--max_seq_length={options.max_seq_length} less [CLS] and "
                                 f"[SEP]")

    def read(self, options, tokenizer):
        train = ner_data.read_split(self.data_dir, "train")
        self.scheme = ner_data.resolve_scheme(self.tag_scheme, train)
        self.train = ner_data.normalize_tags(train, self.scheme)
        self.labels = ner_data.get_labels(self.train)
        fine_tuning.shuffle_training_examples(self.train, options.seed)
        logging.info("Tags (%s in the files, IOB2 inside): %s", self.scheme,
                     " ".join(self.labels))
        # Converting checks every tag against the training file's, before any training.
        self.dev = self._read_split("dev", tokenizer, options) if options.do_eval else None
        self.test = self._read_split("test", tokenizer, options) if options.do_predict else None
        self.train_features = ner_data.convert_sentences(
            self.train, self.labels, options.max_seq_length, tokenizer, self.doc_stride) \
            if options.do_train else []
        return len(self.train_features)

    def _read_split(self, split, tokenizer, options):
        sentences = ner_data.normalize_tags(ner_data.read_split(self.data_dir, split),
                                            self.scheme)
        return sentences, ner_data.convert_sentences(sentences, self.labels,
                                                     options.max_seq_length, tokenizer,
                                                     self.doc_stride)

    def write_train_records(self, context, path):
        ner_data.write_features(self.train_features, path)
        logging.info("Training on %d sentences (%d windows), batch %d", len(self.train),
                     len(self.train_features), context.options.train_batch_size)

    def train_dataset(self, context, path, skip_batches):
        options = context.options
        return ner_dataset(path, options.train_batch_size, options.max_seq_length,
                           is_training=True, seed=options.seed, skip_batches=skip_batches,
                           padding=context.padding)

    def _tag(self, context, sentences, features, name, batch_size):
        """Tags the sentences; returns (predicted tags per sentence, mean loss per word)."""
        path = context.record_path(name)
        ner_data.write_features(features, path)
        max_seq_length = context.options.max_seq_length
        predicted, loss, weight = predict_windows(context.trainer, ner_dataset(
            path, batch_size, max_seq_length, is_training=False, padding=context.padding),
            max_seq_length, name, len(features))
        tags = ner_data.assemble_predictions(sentences, features, predicted, self.labels)
        return tags, loss / max(weight, 1.0)

    def _in_file_scheme(self, tags):
        return [ner_data.to_iob1(t) for t in tags] if self.scheme == "iob1" else tags

    def evaluate(self, context):
        sentences, features = self.dev
        predicted, loss = self._tag(context, sentences, features, "eval",
                                    context.options.eval_batch_size)
        evaluation = conlleval.evaluate([s.tags for s in sentences], predicted)
        results = {"eval_precision": evaluation.overall.precision,
                   "eval_recall": evaluation.overall.recall, "eval_f1": evaluation.overall.f1,
                   "eval_accuracy": evaluation.accuracy, "eval_loss": loss,
                   "global_step": context.trainer.global_step}
        for entity, scores in evaluation.per_type.items():
            results.update({f"eval_{name}_{entity}": getattr(scores, name)
                            for name in ("precision", "recall", "f1")})
        logging.info("Eval results: %s\n%s", results, conlleval.report(evaluation))
        if evaluation.tokens:
            logging.info("Eval: %s", against_majority_tag(results, [s.tags for s in sentences]))
        context.write_eval_results(results)
        if context.chief:
            ner_data.write_predictions(sentences, self._in_file_scheme(predicted), os.path.join(
                context.options.output_dir, "eval_predictions.txt"))

    def predict(self, context):
        sentences, features = self.test
        predicted, _ = self._tag(context, sentences, features, "predict",
                                 context.options.predict_batch_size)
        if context.chief:
            ner_data.write_predictions(sentences, self._in_file_scheme(predicted), os.path.join(
                context.options.output_dir, "test_predictions.txt"))

    def export_module(self, context):
        options = context.options
        return export.NerExport(context.trainer.model, options.vocab_file,
                                options.do_lower_case, options.max_seq_length, self.labels,
                                self.doc_stride)
