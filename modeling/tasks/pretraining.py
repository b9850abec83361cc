"""Pre-training as the original `run_pretraining.py`: reading and checking its records, the
masked-LM and next-sentence losses and metrics, trained by the shared `Trainer`, and the run;
and the paper's Table 5 ablations, the masked LM alone ("No NSP") and a left-to-right LM
("LTR & No NSP"), chosen by `pretraining_objective`."""
import contextlib
import dataclasses
import os

import numpy as np
import tensorflow as tf
from absl import logging
from google.protobuf import message

from modeling import heads
from modeling.data import pretraining as pretraining_data, pretraining_pipeline, records
from modeling.encoder.config import BertConfig
from modeling.evaluation import baseline
from modeling.models.pretraining import (BertLeftToRightLM, BertMaskedLM, BertPretrainer,
                                         next_token_labels)
from modeling.runtime import files
from modeling.training import input_pipeline, runs
from modeling.training.objective import SUM, Objective
from modeling.training.options import (ORIGINAL_CHECKPOINT_DIR, TrainingOptions,
                                       check_max_seq_length, refuse_untrained,
                                       require_non_negative)
from modeling.training.trainer import Trainer, error_reason


def _masked_lm_counts(log_probs, label_ids, weights, global_weight):
    """The masked-LM loss (its share of the global one) and its metric counts."""
    loss, example_loss = heads.masked_lm_loss(log_probs, label_ids, weights, global_weight)
    predictions = tf.argmax(log_probs, -1, output_type=tf.int32)
    return loss, {
        "mlm_loss": loss,
        "mlm_correct": tf.reduce_sum(weights * tf.cast(tf.equal(predictions, label_ids),
                                                       tf.float32)),
        "mlm_weight": tf.reduce_sum(weights),
        "mlm_loss_sum": tf.reduce_sum(weights * example_loss),
    }


class MaskedLMNextSentenceObjective(Objective):
    """The original `run_pretraining.py`'s: a `BertPretrainer`, the masked-LM loss plus the
    next-sentence one."""
    METRICS = ("loss", "mlm_loss", "nsp_loss", "mlm_correct", "mlm_weight", "mlm_loss_sum",
               "nsp_correct", "nsp_loss_sum", "examples")
    # What its masked-LM metrics are called: the masked tokens ("masked_lm"), or every next
    # token of a left-to-right model ("next_token").
    PREDICTED = "masked_lm"

    def build_model(self, config):
        return BertPretrainer(config)

    @staticmethod
    def labels(batch):
        """(int32 ids [B, P], float32 weights [B, P]) of the predicted tokens."""
        return batch["masked_lm_ids"], batch["masked_lm_weights"]

    def global_counts(self, batch):
        """Σ masked-LM weights and the number of examples over all replicas."""
        context = tf.distribute.get_replica_context()
        _, weights = self.labels(batch)
        return (context.all_reduce(SUM, tf.reduce_sum(weights)),
                context.all_reduce(SUM, tf.cast(tf.shape(weights)[0], tf.float32)))

    def replica_loss(self, outputs, batch, global_weight, global_batch):
        """This replica's share of the global losses, and its metric counts."""
        mlm_loss, counts = _masked_lm_counts(outputs["masked_lm_log_probs"],
                                             *self.labels(batch), global_weight)
        nsp_loss, nsp_example_loss = heads.classification_loss(
            outputs["next_sentence_log_probs"], batch["next_sentence_labels"], global_batch)
        nsp_predictions = tf.argmax(outputs["next_sentence_log_probs"], -1, output_type=tf.int32)
        labels = tf.reshape(batch["next_sentence_labels"], [-1])
        counts.update({
            "nsp_loss": nsp_loss,
            "nsp_correct": tf.reduce_sum(tf.cast(tf.equal(nsp_predictions, labels), tf.float32)),
            "nsp_loss_sum": tf.reduce_sum(nsp_example_loss),
            "examples": tf.cast(tf.shape(labels)[0], tf.float32),
        })
        return mlm_loss + nsp_loss, counts

    def loop_scalars(self, totals, steps):
        scalars = {
            "loss": totals["loss"] / steps,
            f"{self.PREDICTED}_loss": totals["mlm_loss"] / steps,
            f"{self.PREDICTED}_accuracy": totals["mlm_correct"] / max(totals["mlm_weight"], 1e-9),
        }
        if "nsp_loss" in totals:
            scalars.update(next_sentence_loss=totals["nsp_loss"] / steps,
                           next_sentence_accuracy=totals["nsp_correct"]
                           / max(totals["examples"], 1))
        return scalars

    def evaluate(self, trainer, dataset, max_eval_steps):
        """The original's eval metrics of `trainer`'s model over at most `max_eval_steps`
        batches of `dataset`, in order."""
        totals, batches = trainer.metric_sums(dataset, max_eval_steps)
        if not batches:
            raise ValueError("the evaluation input has no complete batch")
        results = {
            "global_step": trainer.global_step,
            "loss": totals["loss"] / batches,
            f"{self.PREDICTED}_accuracy": totals["mlm_correct"] / totals["mlm_weight"],
            f"{self.PREDICTED}_loss": totals["mlm_loss_sum"] / totals["mlm_weight"],
        }
        if "nsp_correct" in totals:
            results.update(next_sentence_accuracy=totals["nsp_correct"] / totals["examples"],
                           next_sentence_loss=totals["nsp_loss_sum"] / totals["examples"])
        return results


class MaskedLMObjective(MaskedLMNextSentenceObjective):
    """The paper's "No NSP": a `BertMaskedLM`, the masked-LM loss alone."""
    METRICS = ("loss", "mlm_loss", "mlm_correct", "mlm_weight", "mlm_loss_sum")

    def build_model(self, config):
        return BertMaskedLM(config)

    def replica_loss(self, outputs, batch, global_weight, global_batch):
        return _masked_lm_counts(outputs["masked_lm_log_probs"], *self.labels(batch),
                                 global_weight)


class LeftToRightObjective(MaskedLMObjective):
    """The paper's "LTR & No NSP": a `BertLeftToRightLM`, every next token predicted, its
    metrics named next_token_*."""
    PREDICTED = "next_token"

    def build_model(self, config):
        return BertLeftToRightLM(config)

    labels = staticmethod(next_token_labels)

    def replica_loss(self, outputs, batch, global_weight, global_batch):
        return _masked_lm_counts(outputs["next_token_log_probs"], *self.labels(batch),
                                 global_weight)


# --pretraining_objective: what is trained on the records of each `pretraining_data.OBJECTIVES`.
OBJECTIVES = {"mlm_nsp": MaskedLMNextSentenceObjective, "mlm": MaskedLMObjective,
              "ltr": LeftToRightObjective}


def constant_guess_accuracies(dataset, max_eval_steps,
                              labels=MaskedLMNextSentenceObjective.labels):
    """What the eval accuracies are worth: those of a model that always gives the same answer.

    Over the batches an objective's `evaluate` reads (the first `max_eval_steps` of
    `dataset`): the share of the most frequent predicted token among the predicted positions
    (by their weights), and, where the records have next-sentence labels, the share of the
    majority one.

    Args:
      dataset: batches of a pre-training input.
      max_eval_steps: int.
      labels: an objective's `labels`: the predicted ids and their weights in a batch.

    Returns:
      dict: masked_lm_accuracy, masked_lm_id (of the predicted tokens, whatever they are),
      and next_sentence_accuracy, next_sentence_label if the records have the labels.
    """
    token_counts, label_counts = np.zeros([0]), np.zeros([2])
    for batch in dataset.take(max_eval_steps):
        ids, weights = labels(batch)
        counts = np.bincount(ids.numpy().ravel(), weights.numpy().ravel())
        token_counts = np.pad(token_counts, [0, max(0, len(counts) - len(token_counts))])
        token_counts[:len(counts)] += counts
        if "next_sentence_labels" in batch:
            label_counts += np.bincount(batch["next_sentence_labels"].numpy().ravel(),
                                        minlength=2)
    floor = {"masked_lm_accuracy": token_counts.max() / token_counts.sum(),
             "masked_lm_id": int(token_counts.argmax())}
    if label_counts.sum():
        floor.update(next_sentence_accuracy=label_counts.max() / label_counts.sum(),
                     next_sentence_label=int(label_counts.argmax()))
    return floor


def expand_files(input_file):
    """Comma-separated files or globs -> paths, local or remote (gs://...)."""
    return pretraining_pipeline.expand_input_patterns(input_file, tf.io.gfile.glob)


def check_records(paths, max_seq_length, max_predictions_per_seq, vocab_size, records=64,
                  objective="mlm_nsp"):
    """Reads the first records of each file and checks them against the flags and config:
    records of `objective` (a key of `pretraining_data.OBJECTIVES`), of these sizes.

    Raises:
      ValueError: naming the file, the feature and the value that does not fit.
    """
    schema = pretraining_data.OBJECTIVES[objective].schema
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
            _check_kind(path, set(features), objective)
            for name, (length, source) in expected.items():
                if name not in features:
                    raise ValueError(f"{path}: record {count} has no feature {name!r}")
                values = features[name].int64_list.value or features[name].float_list.value
                if len(values) != length:
                    raise ValueError(f"{path}: {name} has {len(values)} values but "
                                     f"{source} says {length}")
            for name in ("input_ids", "masked_lm_ids"):
                if name not in expected:
                    continue
                top = max(features[name].int64_list.value)
                if top >= vocab_size:
                    raise ValueError(f"{path}: {name} contains {top}, but the config's "
                                     f"vocab_size is {vocab_size}")
        if count == 0:
            raise ValueError(f"{path}: no records")


def _check_kind(path, features, objective):
    """Refuses records made for another objective than `objective`, naming both."""
    made_for = [name for name, other in pretraining_data.OBJECTIVES.items()
                if set(other.schema.features) == features]
    if made_for and made_for != [objective]:
        raise ValueError(f"{path} holds records for --pretraining_objective={made_for[0]} "
                         f"(features {', '.join(sorted(features))}), not for "
                         f"--pretraining_objective={objective}: make them with "
                         f"create_pretraining_data.py --pretraining_objective={objective}")


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
                        is_training, seed=12345, skip_batches=0, objective="mlm_nsp"):
    """Batches of model inputs and labels (int32, float32 weights), keyed as BertPretrainer's.

    Training: files shuffled and interleaved, records shuffled, repeated forever, fixed batch
    shape, as the original reads them. It is deterministic for a seed, so that a resumed run
    skips the `skip_batches` batches it has already trained on and sees the same data as an
    uninterrupted one. Evaluation: files in order, once, with a last partial batch.
    `objective` says which records (`pretraining_data.OBJECTIVES`) the files hold.
    """
    spec = input_pipeline.parse_spec(pretraining_data.OBJECTIVES[objective].schema,
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
    # A key of OBJECTIVES: the original's objective, or one of the paper's Table 5 ablations.
    pretraining_objective: str = "mlm_nsp"

    POSITIVE = TrainingOptions.POSITIVE + ("num_train_steps", "max_eval_steps",
                                           "max_predictions_per_seq")
    INPUT_FILES = ("bert_config_file",)

    def check_values(self):
        super().check_values()
        if not self.do_train and not self.do_eval:
            raise ValueError("At least one of --do_train or --do_eval must be True.")
        require_non_negative("num_warmup_steps", self.num_warmup_steps)
        if self.pretraining_objective not in OBJECTIVES:
            raise ValueError(f"--pretraining_objective must be one of {sorted(OBJECTIVES)}, "
                             f"got {self.pretraining_objective!r}")


def objective_config(config, objective, config_file):
    """The model's config for `objective`: a left-to-right model's gets `causal_attention`,
    which its exported bert_config.json carries on to fine-tuning and export.

    Raises:
      ValueError: a config of a left-to-right model for a bidirectional objective.
    """
    if objective == "ltr":
        return BertConfig.from_dict(dict(config.to_dict(), causal_attention=True))
    if config.causal_attention:
        raise ValueError(f"{config_file} says causal_attention (a left-to-right model), which "
                         f"only --pretraining_objective=ltr trains, not "
                         f"--pretraining_objective={objective}")
    return config


def run(options):
    """Pre-trains and/or evaluates as `options` ask, as the original `run_pretraining.py`:
    checkpoints, summaries and eval_results.txt in output_dir; after training, the
    original-format checkpoint and its config in output_dir/export/."""
    config = objective_config(runs.read_config(options), options.pretraining_objective,
                              options.bert_config_file)
    check_max_seq_length(options.max_seq_length, config, options.bert_config_file)
    strategy = options.strategy()  # first of all TensorFlow work
    # Held before the records are checked (a minute on a large corpus).
    with runs.output_dir_held(options, strategy) as (chief, write_dir):
        _run_in_output_dir(options, config, strategy, chief, write_dir)


def _run_in_output_dir(options, config, strategy, chief, write_dir):
    """`run` once output_dir is this run's; this worker writes in `write_dir`
    (`distribution.write_dir`)."""
    paths = expand_files(options.input_file)
    records_of = options.pretraining_objective  # a key of `pretraining_data.OBJECTIVES`
    check_records(paths, options.max_seq_length, options.max_predictions_per_seq,
                  config.vocab_size, objective=records_of)
    options.check_train_batch(strategy)
    objective = OBJECTIVES[records_of]()
    trainer = Trainer(objective, strategy, config, options.learning_rate,
                      options.num_train_steps, options.num_warmup_steps,
                      **options.trainer_options())
    if options.init_checkpoint:
        trainer.init_from(options.init_checkpoint, options.allow_fewer_layers)

    if options.do_train:
        def dataset_fn(skip_batches):
            return pretraining_dataset(
                paths, options.train_batch_size, options.max_seq_length,
                options.max_predictions_per_seq, is_training=True, seed=options.seed,
                skip_batches=skip_batches, objective=records_of)
        with _input_errors(options.input_file):
            trainer.train(dataset_fn, options.train_batch_size, options.output_dir,
                          options.num_train_steps, options.iterations_per_loop,
                          options.save_checkpoints_steps, options.keep_checkpoint_max)
        runs.keep_original(trainer, write_dir)
        if chief:
            exported_config = os.path.join(options.output_dir, ORIGINAL_CHECKPOINT_DIR,
                                           "bert_config.json")
            if records_of == "ltr":  # the config given, with causal_attention
                with files.atomic_write(exported_config) as writer:
                    writer.write(config.to_json_string())
            else:
                tf.io.gfile.copy(options.bert_config_file, exported_config, overwrite=True)

    if options.do_eval:
        if not options.do_train and not trainer.restore_latest(options.output_dir):
            refuse_untrained(options, [] if options.init_checkpoint else ["every variable"],
                             "evaluate")
        dataset = pretraining_dataset(
            paths, options.eval_batch_size, options.max_seq_length,
            options.max_predictions_per_seq, is_training=False, objective=records_of)
        with _input_errors(options.input_file):
            results = objective.evaluate(trainer, dataset, options.max_eval_steps)
            floor = constant_guess_accuracies(dataset, options.max_eval_steps, objective.labels)
        logging.info("Eval results: %s", results)
        predicted = objective.PREDICTED
        guesses = {f"{predicted}_accuracy": [(
            f"always guessing the most frequent {predicted.split('_')[0]} token, id "
            f"{floor['masked_lm_id']}", floor["masked_lm_accuracy"])]}
        if "next_sentence_accuracy" in floor:
            guesses["next_sentence_accuracy"] = [(
                f"always guessing the majority label, {floor['next_sentence_label']}",
                floor["next_sentence_accuracy"])]
        logging.info("Eval: %s", baseline.beside(results, guesses))
        if chief:
            files.write_eval_results(results, os.path.join(options.output_dir,
                                                           "eval_results.txt"))
