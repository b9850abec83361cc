"""TFRecords without TensorFlow, and the record schemas their writers and readers share."""
import numpy as np
import pytest
import tensorflow as tf

from modeling.data import records

SCHEMA = records.Schema(ids=records.int64s("max_seq_length"), scores=records.floats(2, "k"),
                        label=records.int64s(), index=records.int64s(1))


def test_our_framing_is_tensorflows(tmp_path):
    path = tmp_path / "x.tfrecord"
    payloads = [b"", b"abc", bytes(range(256)) * 40]
    with open(path, "wb") as writer:
        for payload in payloads:
            writer.write(records.frame(payload))
    assert list(tf.data.TFRecordDataset(str(path)).as_numpy_iterator()) == payloads
    assert list(records.read_records(path)) == payloads
    with tf.io.TFRecordWriter(str(tmp_path / "tf.tfrecord")) as writer:
        for payload in payloads:
            writer.write(payload)
    assert (tmp_path / "tf.tfrecord").read_bytes() == path.read_bytes()


def test_a_corrupt_record_is_refused(tmp_path):
    path = tmp_path / "x.tfrecord"
    path.write_bytes(records.frame(b"abc")[:-1] + b"\0")
    with pytest.raises(ValueError, match="corrupt TFRecord at byte"):
        list(records.read_records(path))


def test_varints_are_protobufs():
    for value in (0, 1, 127, 128, 300, 16383, 16384, 2 ** 40, 2 ** 64 - 1):
        example = tf.train.Example()
        example.features.feature["x"].int64_list.value.append(value - (value >> 63 << 64))
        assert example.SerializeToString().endswith(records.varint(value))
    table = records.VarintTable(200)
    assert table.encode([5, 199, 128]) == records.varint(5) + records.varint(199) + \
        records.varint(128)
    with pytest.raises(IndexError):
        table.encode([200])
    for values in ([], [0, 1, 127], [0, 128, 5], [3, 199], [127, 199, 1]):
        assert table.encode_small(values) == table.encode(values)


def test_shapes_resolve_the_named_sizes():
    assert SCHEMA.shapes(max_seq_length=7, k=3) == {
        "ids": ("int64", (7,)), "scores": ("float", (2, 3)), "label": ("int64", ()),
        "index": ("int64", (1,))}
    with pytest.raises(ValueError, match=r"needs the sizes \['k'\]"):
        SCHEMA.shapes(max_seq_length=7)
    with pytest.raises(ValueError, match="int64 or float"):
        records.Feature("string")


def test_serialized_records_are_examples_in_the_schemas_order_and_shapes():
    encoder = SCHEMA.encoder(max_seq_length=3, k=2)
    table = records.VarintTable(1000)
    serialized = encoder.serialize({
        "ids": records.varint(999) + records.varint(2 ** 64 - 1) + table.encode([0]),
        "scores": [0.5, -1.0, 2.0, 3.25], "label": table.encode([7]),
        "index": records.varint(10 ** 12)})
    features = tf.train.Example.FromString(serialized).features.feature
    assert sorted(features) == ["ids", "index", "label", "scores"]
    # In the schema's order, as the original's writers put them (the file's bytes depend on it).
    offsets = [serialized.index(name) for name in (b"ids", b"scores", b"label", b"index")]
    assert offsets == sorted(offsets)
    assert list(features["ids"].int64_list.value) == [999, -1, 0]
    assert list(features["scores"].float_list.value) == [0.5, -1.0, 2.0, 3.25]
    assert list(features["label"].int64_list.value) == [7]
    assert list(features["index"].int64_list.value) == [10 ** 12]
    # The same encoder, other payload lengths (its headers are kept by length).
    serialized = encoder.serialize({"ids": table.encode([1, 2, 3]), "scores": [0.0] * 4,
                                    "label": table.encode([300]), "index": b"\0"})
    features = tf.train.Example.FromString(serialized).features.feature
    assert list(features["ids"].int64_list.value) == [1, 2, 3]
    assert list(features["label"].int64_list.value) == [300]


@pytest.mark.parametrize("change, message", [
    (dict(ids=records.varint(1) * 4), r"'ids' has 4 values; its schema says 3"),
    (dict(ids=records.varint(300) + b"\1"), r"'ids' has 2 values; its schema says 3"),
    (dict(scores=[1.0] * 3), r"'scores' has 3 values; its schema says 4"),
    (dict(label=b""), r"'label' has 0 values; its schema says 1"),
    (dict(extra=b"\1"), r"record features .* are not the schema's"),
])
def test_a_record_that_does_not_fit_the_schema_is_refused(change, message):
    values = {"ids": b"\1\2\3", "scores": [0.0] * 4, "label": b"\1", "index": b"\0"}
    with pytest.raises(ValueError, match=message):
        SCHEMA.encoder(max_seq_length=3, k=2).serialize(dict(values, **change))
    del values["index"]
    with pytest.raises(ValueError, match="are not the schema's"):
        SCHEMA.encoder(max_seq_length=3, k=2).serialize(dict(values, other=b"\0"))


def test_records_parse_with_the_shapes_of_the_schema(tmp_path):
    path = tmp_path / "x.tfrecord"
    encoder = SCHEMA.encoder(max_seq_length=3, k=2)
    with open(path, "wb") as writer:
        for row in range(2):
            writer.write(records.frame(encoder.serialize({
                "ids": bytes([row, 1, 2]), "scores": [row, 1.0, 2.0, 3.0],
                "label": bytes([row]), "index": b"\5"})))
    dtypes = {"int64": tf.int64, "float": tf.float32}
    spec = {name: tf.io.FixedLenFeature(shape, dtypes[dtype])
            for name, (dtype, shape) in SCHEMA.shapes(max_seq_length=3, k=2).items()}
    batch = next(iter(tf.data.TFRecordDataset(str(path)).batch(2).map(
        lambda raw: tf.io.parse_example(raw, spec))))
    np.testing.assert_array_equal(batch["ids"], [[0, 1, 2], [1, 1, 2]])
    np.testing.assert_array_equal(batch["scores"], [[[0, 1], [2, 3]], [[1, 1], [2, 3]]])
    np.testing.assert_array_equal(batch["label"], [0, 1])
    np.testing.assert_array_equal(batch["index"], [[5], [5]])
