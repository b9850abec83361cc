"""Pre-training: the masked-LM and next-sentence losses and metrics on the shared `Trainer`."""
import tensorflow as tf

from modeling import heads
from modeling.data import pretraining as pretraining_data
from modeling.data import pretraining_pipeline
from modeling.models.pretraining import BertPretrainer
from modeling.training import input_pipeline
from modeling.training.trainer import SUM, Trainer, shard_by_data


EVAL_KEYS = ("global_step", "loss", "masked_lm_accuracy", "masked_lm_loss",
             "next_sentence_accuracy", "next_sentence_loss")


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

    @tf.function
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
        for batch in self.strategy.experimental_distribute_dataset(shard_by_data(dataset)):
            if batches >= max_eval_steps:
                break
            for key, value in self._eval_step(batch).items():
                totals[key] = totals.get(key, 0.0) + float(value)
            batches += 1
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
        for raw in tf.data.TFRecordDataset(path).take(records):
            count += 1
            features = tf.train.Example.FromString(raw.numpy()).features.feature
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
