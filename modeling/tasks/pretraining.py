"""Pre-training as the original `run_pretraining.py`: reading and checking its records, the
masked-LM and next-sentence losses and metrics on the shared `Trainer`, and the run."""
import contextlib
import dataclasses
import os

import numpy as np
import tensorflow as tf
from absl import logging
from google.protobuf import message

from modeling import files, heads
from modeling.data import pretraining as pretraining_data, pretraining_pipeline, records
from modeling.encoder.config import BertConfig
from modeling.evaluation import baseline
from modeling.models.pretraining import BertPretrainer
from modeling.training import (compilation_cache, distribution, fine_tuning, input_pipeline,
                               output_lock)
from modeling.training.options import (ORIGINAL_CHECKPOINT_DIR, TrainingOptions,
                                       check_max_seq_length, refuse_untrained,
                                       require_non_negative)
from modeling.training.progress import PassProgress
from modeling.training.trainer import SUM, Trainer, error_reason, shard_by_data


class Pretrainer(Trainer):
    """Trains a `BertPretrainer` as the original `run_pretraining.py`."""
    METRICS = ("loss", "mlm_loss", "nsp_loss", "mlm_correct", "mlm_weight", "mlm_loss_sum",
               "nsp_correct", "nsp_loss_sum", "examples")

    def build_model(self, config):
        return BertPretrainer(config)

    def global_counts(self, batch):
        """Σ masked-LM weights and the number of examples over all replicas."""
        context = tf.distribute.get_replica_context()
        weights = batch["masked_lm_weights"]
        return (context.all_reduce(SUM, tf.reduce_sum(weights)),
                context.all_reduce(SUM, tf.cast(tf.shape(weights)[0], tf.float32)))

    def replica_loss(self, outputs, batch, global_weight, global_batch):
        """This replica's share of the global losses, and its metric counts."""
        weights = batch["masked_lm_weights"]
        mlm_loss, mlm_example_loss = heads.masked_lm_loss(
            outputs["masked_lm_log_probs"], batch["masked_lm_ids"], weights, global_weight)
        nsp_loss, nsp_example_loss = heads.classification_loss(
            outputs["next_sentence_log_probs"], batch["next_sentence_labels"], global_batch)
        mlm_predictions = tf.argmax(outputs["masked_lm_log_probs"], -1, output_type=tf.int32)
        nsp_predictions = tf.argmax(outputs["next_sentence_log_probs"], -1, output_type=tf.int32)
        labels = tf.reshape(batch["next_sentence_labels"], [-1])
        counts = {
            "mlm_loss": mlm_loss,
            "nsp_loss": nsp_loss,
            "mlm_correct": tf.reduce_sum(weights * tf.cast(
                tf.equal(mlm_predictions, batch["masked_lm_ids"]), tf.float32)),
            "mlm_weight": tf.reduce_sum(weights),
            "mlm_loss_sum": tf.reduce_sum(weights * mlm_example_loss),
            "nsp_correct": tf.reduce_sum(tf.cast(tf.equal(nsp_predictions, labels), tf.float32)),
            "nsp_loss_sum": tf.reduce_sum(nsp_example_loss),
            "examples": tf.cast(tf.shape(labels)[0], tf.float32),
        }
        return mlm_loss + nsp_loss, counts

    def loop_scalars(self, totals, steps):
        return {
            "loss": totals["loss"] / steps,
            "masked_lm_loss": totals["mlm_loss"] / steps,
            "next_sentence_loss": totals["nsp_loss"] / steps,
            "masked_lm_accuracy": totals["mlm_correct"] / max(totals["mlm_weight"], 1e-9),
            "next_sentence_accuracy": totals["nsp_correct"] / max(totals["examples"], 1),
        }

    @tf.function(autograph=False)
    def _eval_step(self, batch):
        def step(batch):
            outputs = self.model(batch, training=False)
            loss, counts = self.replica_loss(outputs, batch, *self.global_counts(batch))
            return dict(counts, loss=loss)
        per_replica = self.strategy.run(step, args=(batch,))
        return {key: self.strategy.reduce(SUM, value, axis=None)
                for key, value in per_replica.items()}

    def evaluate(self, dataset, max_eval_steps):
        """The original's eval metrics over at most `max_eval_steps` batches, in order."""
        totals, batches = {}, 0
        progress = PassProgress("eval", max_eval_steps, "batches", self.progress_seconds)
        for batch in distribution.per_replica_batches(self.strategy, shard_by_data(dataset)):
            if batches >= max_eval_steps:
                break
            for key, value in self._eval_step(batch).items():
                totals[key] = totals.get(key, 0.0) + float(value)
            batches += 1
            progress.add(1)
        progress.finish()
        if not batches:
            raise ValueError("the evaluation input has no complete batch")
        return {
            "global_step": self.global_step,
            "loss": totals["loss"] / batches,
            "masked_lm_accuracy": totals["mlm_correct"] / totals["mlm_weight"],
            "masked_lm_loss": totals["mlm_loss_sum"] / totals["mlm_weight"],
            "next_sentence_accuracy": totals["nsp_correct"] / totals["examples"],
            "next_sentence_loss": totals["nsp_loss_sum"] / totals["examples"],
        }


def constant_guess_accuracies(dataset, max_eval_steps):
    """What the eval accuracies are worth: those of a model that always gives the same answer.

    Over the batches `Pretrainer.evaluate` reads (the first `max_eval_steps` of `dataset`):
    the share of the most frequent masked token among the masked positions (by
    `masked_lm_weights`), and the share of the majority next-sentence label.

    Returns:
      dict: masked_lm_accuracy, masked_lm_id, next_sentence_accuracy, next_sentence_label.
    """
    token_counts, label_counts = np.zeros([0]), np.zeros([2])
    for batch in dataset.take(max_eval_steps):
        counts = np.bincount(batch["masked_lm_ids"].numpy().ravel(),
                             batch["masked_lm_weights"].numpy().ravel())
        token_counts = np.pad(token_counts, [0, max(0, len(counts) - len(token_counts))])
        token_counts[:len(counts)] += counts
        label_counts += np.bincount(batch["next_sentence_labels"].numpy().ravel(), minlength=2)
    return {"masked_lm_accuracy": token_counts.max() / token_counts.sum(),
            "masked_lm_id": int(token_counts.argmax()),
            "next_sentence_accuracy": label_counts.max() / label_counts.sum(),
            "next_sentence_label": int(label_counts.argmax())}


def expand_files(input_file):
    """Comma-separated files or globs -> paths, local or remote (gs://...)."""
    return pretraining_pipeline.expand_input_patterns(input_file, tf.io.gfile.glob)


def check_records(paths, max_seq_length, max_predictions_per_seq, vocab_size, records=64):
    """Reads the first records of each file and checks them against the flags and config.

    Raises:
      ValueError: naming the file, the feature and the value that does not fit.
    """
    schema = pretraining_data.RECORD_SCHEMA
    shapes = schema.shapes(max_seq_length=max_seq_length,
                           max_predictions_per_seq=max_predictions_per_seq)
    expected = {}  # name -> (length, what says so: the flag named as the size, or the format)
    for name, feature in schema.features.items():
        (dim,) = feature.shape  # each is 1-D
        expected[name] = (shapes[name][1][0], f"--{dim}" if isinstance(dim, str) else "the format")
    for path in paths:
        count = 0
        for raw in _first_records(path, records):
            count += 1
            try:
                features = tf.train.Example.FromString(raw).features.feature
            except message.DecodeError:
                raise ValueError(f"{path}: record {count} is not a tf.train.Example") from None
            for name, (length, source) in expected.items():
                if name not in features:
                    raise ValueError(f"{path}: record {count} has no feature {name!r}")
                values = features[name].int64_list.value or features[name].float_list.value
                if len(values) != length:
                    raise ValueError(f"{path}: {name} has {len(values)} values but "
                                     f"{source} says {length}")
            for name in ("input_ids", "masked_lm_ids"):
                top = max(features[name].int64_list.value)
                if top >= vocab_size:
                    raise ValueError(f"{path}: {name} contains {top}, but the config's "
                                     f"vocab_size is {vocab_size}")
        if count == 0:
            raise ValueError(f"{path}: no records")


def _first_records(path, count):
    """The first `count` raw records. A local file is read whole first, its framing and CRCs
    checked (at disk speed: about a second per GB), so that a truncated, bit-flipped or
    non-TFRecord file is named, with the byte offset, before training; a remote one (gs://)
    is only checked as far as it is read here, and any later damage is reported, with
    --input_file, when training meets it."""
    if "://" not in path:
        first = []
        for raw in records.read_records(path):
            if len(first) < count:
                first.append(raw)
        return first
    try:
        return [raw.numpy() for raw in tf.data.TFRecordDataset(path).take(count)]
    except tf.errors.OpError as error:
        raise ValueError(f"{path}: not a readable TFRecord file ({error_reason(error)})") from None


@contextlib.contextmanager
def _input_errors(input_file):
    """Damage or bad ids found in the records while running: one line naming the input."""
    try:
        yield
    except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as error:
        raise ValueError(f"--input_file={input_file}: {error_reason(error)}") from None


def pretraining_dataset(paths, batch_size, max_seq_length, max_predictions_per_seq,
                        is_training, seed=12345, skip_batches=0):
    """Batches of model inputs and labels (int32, float32 weights), keyed as BertPretrainer's.

    Training: files shuffled and interleaved, records shuffled, repeated forever, fixed batch
    shape, as the original reads them. It is deterministic for a seed, so that a resumed run
    skips the `skip_batches` batches it has already trained on and sees the same data as an
    uninterrupted one. Evaluation: files in order, once, with a last partial batch.
    """
    spec = input_pipeline.parse_spec(pretraining_data.RECORD_SCHEMA,
                                     max_seq_length=max_seq_length,
                                     max_predictions_per_seq=max_predictions_per_seq)
    if is_training:
        files = tf.data.Dataset.from_tensor_slices(paths).repeat()
        files = files.shuffle(len(paths), seed=seed)
        records = files.interleave(tf.data.TFRecordDataset, cycle_length=min(4, len(paths)),
                                   num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        records = records.shuffle(input_pipeline.SHUFFLE_BUFFER, seed=seed + 1)
        records = records.skip(skip_batches * batch_size)
        batches = records.batch(batch_size, drop_remainder=True)
    else:
        batches = tf.data.TFRecordDataset(paths).batch(batch_size)

    def parse(serialized):
        return input_pipeline.int32_inputs(tf.io.parse_example(serialized, spec))

    return batches.map(parse, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


@dataclasses.dataclass(kw_only=True)
class PretrainingOptions(TrainingOptions):
    """run_pretraining.py's options, by the original's flag names."""
    bert_config_file: str
    input_file: str
    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    num_train_steps: int = 100000
    num_warmup_steps: int = 10000
    max_eval_steps: int = 100

    POSITIVE = TrainingOptions.POSITIVE + ("num_train_steps", "max_eval_steps",
                                           "max_predictions_per_seq")
    INPUT_FILES = ("bert_config_file",)

    def check_values(self):
        super().check_values()
        if not self.do_train and not self.do_eval:
            raise ValueError("At least one of --do_train or --do_eval must be True.")
        require_non_negative("num_warmup_steps", self.num_warmup_steps)


def run(options):
    """Pre-trains and/or evaluates as `options` ask, as the original `run_pretraining.py`:
    checkpoints, summaries and eval_results.txt in output_dir; after training, the
    original-format checkpoint and its config in output_dir/export/."""
    options.check()
    compilation_cache.enable(options.xla_cache_dir)  # before TensorFlow reads XLA's settings
    config = BertConfig.from_json_file(options.bert_config_file)
    check_max_seq_length(options.max_seq_length, config, options.bert_config_file)
    strategy = options.strategy()  # first of all TensorFlow work
    chief = distribution.is_chief(strategy)
    tf.io.gfile.makedirs(options.output_dir)
    # Before the records are checked (a minute on a large corpus): a second run is told at once.
    with output_lock.held(options.output_dir) if chief and options.do_train \
            else contextlib.nullcontext():
        with distribution.write_dir(strategy, options.output_dir) as write_dir:
            _run_in_output_dir(options, config, strategy, chief, write_dir)


def _run_in_output_dir(options, config, strategy, chief, write_dir):
    """`run` once output_dir is this run's; this worker writes in `write_dir`
    (`distribution.write_dir`)."""
    paths = expand_files(options.input_file)
    check_records(paths, options.max_seq_length, options.max_predictions_per_seq,
                  config.vocab_size)
    options.check_train_batch(strategy)
    pretrainer = Pretrainer(strategy, config, options.learning_rate, options.num_train_steps,
                            options.num_warmup_steps, **options.trainer_options())
    if options.init_checkpoint:
        pretrainer.init_from(options.init_checkpoint, options.allow_fewer_layers)

    if options.do_train:
        def dataset_fn(skip_batches):
            return pretraining_dataset(
                paths, options.train_batch_size, options.max_seq_length,
                options.max_predictions_per_seq, is_training=True, seed=options.seed,
                skip_batches=skip_batches)
        with _input_errors(options.input_file):
            pretrainer.train(dataset_fn, options.train_batch_size, options.output_dir,
                             options.num_train_steps, options.iterations_per_loop,
                             options.save_checkpoints_steps, options.keep_checkpoint_max)
        fine_tuning.keep_original(pretrainer, write_dir)
        if chief:
            tf.io.gfile.copy(options.bert_config_file, os.path.join(
                options.output_dir, ORIGINAL_CHECKPOINT_DIR, "bert_config.json"), overwrite=True)

    if options.do_eval:
        if not options.do_train and not pretrainer.restore_latest(options.output_dir):
            refuse_untrained(options, [] if options.init_checkpoint else ["every variable"],
                             "evaluate")
        dataset = pretraining_dataset(
            paths, options.eval_batch_size, options.max_seq_length,
            options.max_predictions_per_seq, is_training=False)
        with _input_errors(options.input_file):
            results = pretrainer.evaluate(dataset, options.max_eval_steps)
            floor = constant_guess_accuracies(dataset, options.max_eval_steps)
        logging.info("Eval results: %s", results)
        logging.info("Eval: %s", baseline.beside(results, {
            "masked_lm_accuracy": [(f"always guessing the most frequent masked token, id "
                                    f"{floor['masked_lm_id']}", floor["masked_lm_accuracy"])],
            "next_sentence_accuracy": [(f"always guessing the majority label, "
                                        f"{floor['next_sentence_label']}",
                                        floor["next_sentence_accuracy"])]}))
        if chief:
            files.write_eval_results(results, os.path.join(options.output_dir,
                                                           "eval_results.txt"))
