"""The input pipeline the tasks share: their records, parsed by the schema their writer wrote
them with, and batched as the original's `file_based_input_fn_builder` reads them."""
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
                   seed=12345, skip_batches=0):
    """Parsed batches of a TFRecord file.

    Training: repeated, shuffled in a 100-record buffer and batched with a fixed shape, as the
    original; deterministic for a seed, so a resumed run skips the `skip_batches` batches it
    already trained on. Otherwise: in file order, once, each record with its "example_index"
    (int64), which `Trainer.predict` puts the outputs back in order by.

    Args:
      spec: dict of `tf.io.FixedLenFeature`s to parse.
      to_inputs: callable(dict of parsed tensors [B, ...]) -> the model's input dict.
    """
    records = tf.data.TFRecordDataset(path)
    if is_training:
        records = records.repeat().shuffle(SHUFFLE_BUFFER, seed=seed)
        batches = records.skip(skip_batches * batch_size).batch(batch_size, drop_remainder=True)
        batches = batches.map(lambda serialized: to_inputs(tf.io.parse_example(serialized, spec)),
                              num_parallel_calls=tf.data.AUTOTUNE)
    else:
        batches = records.enumerate().batch(batch_size, drop_remainder=drop_remainder)
        batches = batches.map(
            lambda index, serialized: dict(to_inputs(tf.io.parse_example(serialized, spec)),
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
