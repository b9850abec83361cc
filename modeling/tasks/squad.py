"""Fine-tuning and predicting a `BertSpanModel` as the original `run_squad.py`, on any
`tf.distribute` strategy: its loss, input pipeline and raw results."""
import json
import os

import numpy as np
import tensorflow as tf
from absl import logging

from modeling import export, heads
from modeling.data import squad as squad_data, text, windows
from modeling.evaluation import squad as squad_evaluation, squad_answers
from modeling.models.squad import BertSpanModel
from modeling.runtime import files
from modeling.training import fine_tuning, input_pipeline
from modeling.training.options import require_positive


def squad_dataset(path, batch_size, max_seq_length, is_training, seed=12345, skip_batches=0,
                  padding=None):
    """Batches of `data.squad.FeatureWriter` records, keyed as `BertSpanModel`'s inputs (see
    `input_pipeline.record_batches`); `unique_ids` stay int64."""
    def to_inputs(features):
        unique_ids = features.pop("unique_ids")
        return dict(input_pipeline.int32_inputs(features), unique_ids=unique_ids)
    spec = input_pipeline.parse_spec(squad_data.record_schema(is_training),
                                     max_seq_length=max_seq_length)
    return input_pipeline.record_batches(path, spec, to_inputs, batch_size, is_training,
                                         seed=seed, skip_batches=skip_batches,
                                         padding=padding)


def predict_logits(trainer, dataset, max_seq_length, total=None):
    """(unique_ids [N] int64, start_logits [N, T], end_logits [N, T]) in input order. With
    dynamic padding, the positions beyond a batch's length are -inf: never an answer's start
    or end, nor one of the n best that `squad_answers` ranks (the original ranks the padding's
    logits too)."""
    outputs = trainer.predict(dataset, ["unique_ids", "start_logits", "end_logits"],
                              {"start_logits": max_seq_length, "end_logits": max_seq_length},
                              pad_value=-np.inf, total=total)
    return outputs["unique_ids"], outputs["start_logits"], outputs["end_logits"]


class SquadTask(fine_tuning.Task):
    """run_squad.py: SQuAD v1.1 or v2.0 json files; --do_predict writes the original's
    predictions.json, nbest_predictions.json (null_odds.json for v2.0) and, when the predict
    file has answers, eval_results.json with the official metric.

    Trains a `BertSpanModel`: the mean of the start and end cross-entropies over the global
    batch; the span head starts random unless the checkpoint has it.
    """
    ACTIONS = ("do_train", "do_predict", "export_dir")
    METRICS = ("loss", "examples")
    # The original's span softmax runs over every position, padding included, and its n-best
    # ranks them all: cutting the padding would change the loss and the n-best lists.
    PADDING_IS_INERT = False

    DEFAULT_DOC_STRIDE = 128  # the original's

    def __init__(self, train_file=None, predict_file=None, doc_stride=None, max_query_length=64,
                 n_best_size=20, max_answer_length=30, version_2_with_negative=False,
                 null_score_diff_threshold=0.0, verbose_logging=False):
        """`doc_stride` None is the original's default, 128, which short windows may not
        overlap (the original then reads them end to end); a stride given is checked."""
        self.train_file, self.predict_file = train_file, predict_file
        self.stride_given = doc_stride is not None
        self.doc_stride = self.DEFAULT_DOC_STRIDE if doc_stride is None else doc_stride
        self.max_query_length = max_query_length
        self.n_best_size, self.max_answer_length = n_best_size, max_answer_length
        self.version_2_with_negative = version_2_with_negative
        self.null_score_diff_threshold = null_score_diff_threshold
        self.verbose_logging = verbose_logging

    def build_model(self, config):
        return BertSpanModel(config)

    def replica_loss(self, outputs, batch, global_batch):
        loss, per_example = heads.span_loss(outputs["start_logits"], outputs["end_logits"],
                                            batch["start_positions"], batch["end_positions"],
                                            global_batch)
        return loss, {
            "examples": tf.cast(tf.shape(per_example)[0], tf.float32)}

    def check(self, options, config):
        for name in ("doc_stride", "max_query_length", "n_best_size", "max_answer_length"):
            require_positive(name, getattr(self, name))
        for action, name in (("do_train", "train_file"), ("do_predict", "predict_file")):
            if getattr(options, action):
                if not getattr(self, name):
                    raise ValueError(f"--{action} needs --{name}")
                files.check_input(getattr(self, name), f"--{name}")
        if options.max_seq_length <= self.max_query_length + 3:
            raise ValueError(f"--max_seq_length={options.max_seq_length} leaves no room for the "
                             f"document after a question of --max_query_length="
                             f"{self.max_query_length} tokens, [CLS] and two [SEP]")
        free = squad_data.max_tokens_for_doc(options.max_seq_length, self.max_query_length)
        if self.doc_stride >= free and not self.stride_given:
            logging.warning("The default --doc_stride=%d is not below the window's free length "
                            "(%d pieces): the windows will not overlap, as in the original; "
                            "set --doc_stride below it to overlap them", self.doc_stride, free)
        elif self.stride_given:
            windows.check_stride(self.doc_stride, free, "--doc_stride",
                                 f"--max_seq_length={options.max_seq_length} after a question "
                                 f"of --max_query_length={self.max_query_length}, [CLS] and two "
                                 f"[SEP]")

    def read(self, options, tokenizer):
        self.train, self.test = [], []
        if options.do_train:
            self.train = squad_data.read_squad_examples(
                self.train_file, is_training=True,
                version_2_with_negative=self.version_2_with_negative)
            fine_tuning.shuffle_training_examples(self.train, options.seed)
        if options.do_predict:
            self.test = squad_data.read_squad_examples(
                self.predict_file, is_training=False,
                version_2_with_negative=self.version_2_with_negative)
            dataset = text.read_json(self.predict_file)
            self.answered = any(qa.get("answers") for article in dataset["data"]
                                for paragraph in article["paragraphs"] for qa in paragraph["qas"])
        return len(self.train)

    def _write_features(self, context, examples, path, is_training):
        """Writes the examples' features to `path`; returns them (kept for post-processing)."""
        writer = squad_data.FeatureWriter(path, is_training)
        features = []

        def keep(feature):
            features.append(feature)
            writer.process_feature(feature)
        squad_data.convert_examples_to_features(
            examples, context.tokenizer, context.options.max_seq_length, self.doc_stride,
            self.max_query_length, is_training, keep)
        writer.close()
        return features

    def write_train_records(self, context, path):
        features = self._write_features(context, self.train, path, is_training=True)
        logging.info("Training on %d examples (%d features), batch %d", len(self.train),
                     len(features), context.options.train_batch_size)

    def train_dataset(self, context, path, skip_batches):
        options = context.options
        return squad_dataset(path, options.train_batch_size, options.max_seq_length,
                             is_training=True, seed=options.seed, skip_batches=skip_batches,
                             padding=context.padding)

    def predict(self, context):
        options = context.options
        path = context.record_path("eval")
        features = self._write_features(context, self.test, path, is_training=False)
        logging.info("Predicting %d examples (%d features), batch %d", len(self.test),
                     len(features), options.predict_batch_size)
        unique_ids, starts, ends = predict_logits(context.trainer, squad_dataset(
            path, options.predict_batch_size, options.max_seq_length, is_training=False,
            padding=context.padding), options.max_seq_length, len(features))
        results = [squad_answers.RawResult(int(unique_id), start.tolist(), end.tolist())
                   for unique_id, start, end in zip(unique_ids, starts, ends)]
        directory = context.results_dir
        null_odds_file = os.path.join(directory, "null_odds.json")
        squad_answers.write_predictions(
            self.test, features, results, self.n_best_size, self.max_answer_length,
            options.do_lower_case, os.path.join(directory, "predictions.json"),
            os.path.join(directory, "nbest_predictions.json"), null_odds_file,
            self.version_2_with_negative, self.null_score_diff_threshold, self.verbose_logging)
        if context.chief and self.answered:
            self._score(directory, null_odds_file)

    def _score(self, directory, null_odds_file):
        """The official metric, as its script run on these files (its version picks v1.1 or
        v2.0), to eval_results.json."""
        results = squad_evaluation.evaluate_file(
            self.predict_file, os.path.join(directory, "predictions.json"),
            null_odds_file if self.version_2_with_negative else None)
        logging.info("Official SQuAD metric: %s", results)
        with files.atomic_write(os.path.join(directory, "eval_results.json")) as writer:
            writer.write(json.dumps(results, indent=2) + "\n")

    def export_module(self, context):
        options = context.options
        return export.SquadExport(
            context.trainer.model, options.vocab_file, options.do_lower_case,
            options.max_seq_length, self.max_query_length, self.max_answer_length,
            self.version_2_with_negative, self.null_score_diff_threshold, self.doc_stride,
            self.n_best_size)
