"""modeling/training/input_pipeline.py: records parsed by their schema and batched as the
original's input_fn batches them."""
import numpy as np
import tensorflow as tf

from modeling.data import records
from modeling.training import input_pipeline

SCHEMA = records.Schema(input_ids=records.int64s("max_seq_length"),
                        segment_ids=records.int64s("max_seq_length"),
                        weights=records.floats(2), label_ids=records.int64s())


def _write(path, count, seq=3):
    encoder = SCHEMA.encoder(max_seq_length=seq)
    with open(path, "wb") as writer:
        for index in range(count):
            writer.write(records.frame(encoder.serialize({
                "input_ids": bytes([index] * seq), "segment_ids": bytes([0] * seq),
                "weights": [index / 2, 1.0], "label_ids": bytes([index % 2])})))
    return str(path)


def test_the_parse_spec_is_the_schemas():
    spec = input_pipeline.parse_spec(SCHEMA, max_seq_length=5)
    assert spec == {"input_ids": tf.io.FixedLenFeature((5,), tf.int64),
                    "segment_ids": tf.io.FixedLenFeature((5,), tf.int64),
                    "weights": tf.io.FixedLenFeature((2,), tf.float32),
                    "label_ids": tf.io.FixedLenFeature((), tf.int64)}


def test_int32_inputs_cast_ints_keep_floats_and_rename_segment_ids():
    inputs = input_pipeline.int32_inputs({"input_ids": tf.constant([[1]], tf.int64),
                                          "segment_ids": tf.constant([[0]], tf.int64),
                                          "weights": tf.constant([0.5])})
    assert sorted(inputs) == ["input_ids", "token_type_ids", "weights"]
    assert inputs["input_ids"].dtype == tf.int32 and inputs["weights"].dtype == tf.float32


def test_evaluation_reads_in_order_once_with_each_records_index(tmp_path):
    path = _write(tmp_path / "eval.tf_record", 5)
    spec = input_pipeline.parse_spec(SCHEMA, max_seq_length=3)
    batches = list(input_pipeline.record_batches(path, spec, input_pipeline.int32_inputs, 2,
                                                 is_training=False))
    assert [len(b["label_ids"]) for b in batches] == [2, 2, 1]  # the last one partial
    ids = np.concatenate([b["input_ids"][:, 0] for b in batches])
    np.testing.assert_array_equal(ids, [0, 1, 2, 3, 4])
    np.testing.assert_array_equal(np.concatenate([b["example_index"] for b in batches]),
                                  [0, 1, 2, 3, 4])
    np.testing.assert_allclose(batches[1]["weights"], [[1.0, 1.0], [1.5, 1.0]])
    dropped = input_pipeline.record_batches(path, spec, input_pipeline.int32_inputs, 2,
                                            is_training=False, drop_remainder=True)
    assert len(list(dropped)) == 2


def test_training_repeats_and_a_resumed_run_skips_the_batches_it_trained_on(tmp_path):
    path = _write(tmp_path / "train.tf_record", 7)
    spec = input_pipeline.parse_spec(SCHEMA, max_seq_length=3)

    def first_ids(skip, count):
        dataset = input_pipeline.record_batches(path, spec, input_pipeline.int32_inputs, 3,
                                                is_training=True, seed=5, skip_batches=skip)
        return [b["input_ids"][:, 0].numpy().tolist() for b in dataset.take(count)]
    uninterrupted = first_ids(0, 6)  # 18 records from 7: repeated, whole batches
    assert all(len(batch) == 3 for batch in uninterrupted)
    assert set(sum(uninterrupted, [])) <= set(range(7))
    assert first_ids(0, 6) == uninterrupted  # deterministic for a seed
    assert first_ids(4, 2) == uninterrupted[4:]
    assert "example_index" not in next(iter(input_pipeline.record_batches(
        path, spec, input_pipeline.int32_inputs, 3, is_training=True)))
