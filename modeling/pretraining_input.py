"""Reads `create_pretraining_data.py` records for training and evaluation."""
import tensorflow as tf

from modeling import pretraining_pipeline

SHUFFLE_BUFFER = 100  # records, as the original


def feature_spec(max_seq_length, max_predictions_per_seq):
    ints = tf.io.FixedLenFeature
    return {
        "input_ids": ints([max_seq_length], tf.int64),
        "input_mask": ints([max_seq_length], tf.int64),
        "segment_ids": ints([max_seq_length], tf.int64),
        "masked_lm_positions": ints([max_predictions_per_seq], tf.int64),
        "masked_lm_ids": ints([max_predictions_per_seq], tf.int64),
        "masked_lm_weights": ints([max_predictions_per_seq], tf.float32),
        "next_sentence_labels": ints([1], tf.int64),
    }


def expand_files(input_file):
    """Comma-separated files or globs -> paths, local or remote (gs://...)."""
    return pretraining_pipeline.expand_input_patterns(input_file, tf.io.gfile.glob)


def check_records(paths, max_seq_length, max_predictions_per_seq, vocab_size, records=64):
    """Reads the first records of each file and checks them against the flags and config.

    Raises:
      ValueError: naming the file, the feature and the value that does not fit.
    """
    sequence = (max_seq_length, "--max_seq_length")
    predictions = (max_predictions_per_seq, "--max_predictions_per_seq")
    expected = {"input_ids": sequence, "input_mask": sequence, "segment_ids": sequence,
                "masked_lm_positions": predictions, "masked_lm_ids": predictions,
                "masked_lm_weights": predictions, "next_sentence_labels": (1, "the format")}
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
    spec = feature_spec(max_seq_length, max_predictions_per_seq)
    if is_training:
        files = tf.data.Dataset.from_tensor_slices(paths).repeat()
        files = files.shuffle(len(paths), seed=seed)
        records = files.interleave(tf.data.TFRecordDataset, cycle_length=min(4, len(paths)),
                                   num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        records = records.shuffle(SHUFFLE_BUFFER, seed=seed + 1)
        records = records.skip(skip_batches * batch_size)
        batches = records.batch(batch_size, drop_remainder=True)
    else:
        batches = tf.data.TFRecordDataset(paths).batch(batch_size)

    def parse(serialized):
        features = tf.io.parse_example(serialized, spec)
        inputs = {name: tf.cast(value, tf.int32) if value.dtype == tf.int64 else value
                  for name, value in features.items()}
        inputs["token_type_ids"] = inputs.pop("segment_ids")
        return inputs

    return batches.map(parse, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
