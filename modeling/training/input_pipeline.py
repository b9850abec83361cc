"""The input pipeline the tasks share: their records, parsed by the schema their writer wrote
them with, batched as the original's `file_based_input_fn_builder` reads them, and padded to
the records' length (`FixedPadding`, as the original) or to each batch's longest example
(`DynamicPadding`, `LengthBuckets`).

Shape legend: B batch, C choices (multiple choice), T max_seq_length (the records' length),
t a batch's length (at most T).
"""
import dataclasses

import tensorflow as tf

from modeling.data import records

SHUFFLE_BUFFER = 100  # records, as the original

_DTYPES = {records.INT64: tf.int64, records.FLOAT: tf.float32}


def parse_spec(schema, **sizes):
    """The `tf.io.parse_example` spec of a record kind.

    Args:
      schema: the kind's `records.Schema`, as its writer uses it.
      **sizes: the ints its shapes name (max_seq_length=128, say).

    Returns:
      dict name -> `tf.io.FixedLenFeature` (int64 or float32, the schema's shape).
    """
    return {name: tf.io.FixedLenFeature(shape, _DTYPES[dtype])
            for name, (dtype, shape) in schema.shapes(**sizes).items()}


def record_batches(path, spec, to_inputs, batch_size, is_training, drop_remainder=False,
                   seed=12345, skip_batches=0, padding=None):
    """Parsed batches of a TFRecord file.

    Training: repeated, shuffled in a 100-record buffer and batched, as the original;
    deterministic for a seed, so a resumed run skips the `skip_batches` batches it already
    trained on. Otherwise: in file order, once, each record with its "example_index"
    (int64), which `Trainer.predict` puts the outputs back in order by.

    Args:
      spec: dict of `tf.io.FixedLenFeature`s to parse.
      to_inputs: callable(dict of parsed tensors [B, ...]) -> the model's input dict.
      padding: a `FixedPadding` (the default: every batch [B, T], as the original), or a
        `DynamicPadding` or `LengthBuckets`, which cut each batch's sequence features to [B, t].
    """
    padding = padding or FixedPadding()
    stream = tf.data.TFRecordDataset(path)
    if is_training:
        stream = stream.repeat().shuffle(SHUFFLE_BUFFER, seed=seed)
        batches = padding.training_batches(stream, spec, batch_size, skip_batches)
        batches = batches.map(
            lambda serialized: padding.cut(to_inputs(tf.io.parse_example(serialized, spec))),
            num_parallel_calls=tf.data.AUTOTUNE)
    else:
        batches = stream.enumerate().batch(batch_size, drop_remainder=drop_remainder)
        batches = batches.map(
            lambda index, serialized: dict(
                padding.cut(to_inputs(tf.io.parse_example(serialized, spec))),
                example_index=index),
            num_parallel_calls=tf.data.AUTOTUNE)
    return batches.prefetch(tf.data.AUTOTUNE)


def int32_inputs(features):
    """int64 features as int32 (float ones unchanged), `segment_ids` renamed to the model's
    `token_type_ids`."""
    inputs = {name: tf.cast(value, tf.int32) if value.dtype == tf.int64 else value
              for name, value in features.items()}
    inputs["token_type_ids"] = inputs.pop("segment_ids")
    return inputs


class FixedPadding:
    """Every batch at the records' length T, as the original; TPUs need these static shapes."""

    def __str__(self):
        return "fixed padding: every batch at --max_seq_length"

    def training_batches(self, stream, spec, batch_size, skip_batches):
        """Batches of serialized records [B] (string) from the shuffled, repeated `stream`,
        after the first `skip_batches`."""
        del spec  # the records are batched in stream order, whatever their length
        return stream.skip(skip_batches * batch_size).batch(batch_size, drop_remainder=True)

    def cut(self, inputs):
        """The model's inputs of one batch, as they are."""
        return inputs


@dataclasses.dataclass(frozen=True)
class DynamicPadding(FixedPadding):
    """Each batch cut to its longest example, rounded up to a multiple of `multiple` tokens,
    so that a step computes no more padding than that batch needs and the compiled step sees
    at most T / multiple shapes. The records stay written at T.

    It changes no output: a padded key gets exactly zero attention (its adder is -10000, whose
    exp is 0 in float32 and bfloat16), so the real positions' outputs are those of fixed
    padding; cut-off positions are padding no loss or metric reads (the classifier and
    multiple choice read [CLS], NER weighs padding 0). One exception, in training: SQuAD's span
    softmax runs over every position, padding included, as the original's; over t positions
    instead of T it leaves out the padded positions' share.

    Attributes:
      max_seq_length: T, the records' sequence length; no batch is cut longer.
      multiple: the step the batch lengths are rounded up to.
    """
    max_seq_length: int
    multiple: int

    def __post_init__(self):
        if self.multiple < 1 or self.max_seq_length < 1:
            raise ValueError(f"padding multiple {self.multiple} and max_seq_length "
                             f"{self.max_seq_length} must be positive")

    def __str__(self):
        return (f"dynamic padding: each batch cut to its longest example, rounded up to a "
                f"multiple of {self.multiple}, at most {self.max_seq_length}")

    def length(self, input_mask):
        """The length t that a batch (or one record) is cut to.

        Args:
          input_mask: int [..., T], or one multiple-choice record's flat [C * T]: each row is
            1s (real tokens) then 0s (padding).

        Returns:
          int32 scalar: the longest row's token count, rounded up to `multiple`, at least
          `multiple` and at most T.
        """
        rows = tf.reshape(tf.cast(input_mask, tf.int32), [-1, self.max_seq_length])
        longest = tf.reduce_max(tf.reduce_sum(rows, axis=1))
        rounded = (longest + self.multiple - 1) // self.multiple * self.multiple
        return tf.clip_by_value(rounded, min(self.multiple, self.max_seq_length),
                                self.max_seq_length)

    def cut(self, inputs):
        """Every sequence feature of one batch's model inputs, [B, T] or [B, C, T] (input ids,
        mask and types, NER's labels, weights and word ids), cut to [B, t] or [B, C, t], where
        t is `length(inputs["input_mask"])`; other features (labels of the example, ids,
        `is_real_example`) as they are."""
        length = self.length(inputs["input_mask"])
        return {name: value[..., :length] if self._is_sequence(value) else value
                for name, value in inputs.items()}

    def _is_sequence(self, value):
        return value.shape.rank >= 2 and value.shape[-1] == self.max_seq_length


@dataclasses.dataclass(frozen=True)
class LengthBuckets(DynamicPadding):
    """`DynamicPadding` whose training batches each hold examples of one padded length: the
    shuffled stream is split into one queue per length (`tf.data`'s `group_by_window`) and a
    batch leaves a queue when it is full. The steps and the stream of examples stay those of
    `DynamicPadding`; which examples train together changes (an example may wait in its queue
    for a later batch), hence not the default. Evaluation and prediction batch in file order,
    as `DynamicPadding` does.

    Deterministic for a seed; a resumed run recomputes the skipped batches' grouping (reading
    only their masks) and drops them, so it trains on the batches an uninterrupted run would.
    """

    def __str__(self):
        return (f"length buckets: training batches of examples of one length, rounded up to a "
                f"multiple of {self.multiple}, at most {self.max_seq_length}; "
                f"{DynamicPadding.__str__(self)}")

    def training_batches(self, stream, spec, batch_size, skip_batches):
        mask_spec = {"input_mask": spec["input_mask"]}

        def bucket(serialized):
            mask = tf.io.parse_single_example(serialized, mask_spec)["input_mask"]
            return tf.cast(self.length(mask), tf.int64)
        batches = stream.group_by_window(
            bucket, lambda _, window: window.batch(batch_size, drop_remainder=True),
            window_size=batch_size)
        return batches.skip(skip_batches)
