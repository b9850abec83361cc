"""modeling/training/input_pipeline.py: records parsed by their schema and batched as the
original's input_fn batches them; batches cut to their longest example (dynamic padding), and
training batches grouped by length (bucketing), deterministic and resumable."""
import numpy as np
import pytest
import tensorflow as tf

from modeling.data import classifier as classifier_data
from modeling.data import records
from modeling.tasks.classifier import classifier_dataset
from modeling.text import tokenization
from modeling.training import input_pipeline
from modeling.training.input_pipeline import DynamicPadding, FixedPadding, LengthBuckets
from modeling.training.trainer import concatenate_padded

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


SEQ = 40  # not a multiple of the padding step: the longest batches are cut to 40, not 48
WORDS = ("the a keeper lit lamp at dusk boat left harbour early market closed before noon "
         "river rose in spring storm broke old mast children carried stones to wall").split()


def _mask(lengths, seq=SEQ):
    return np.array([[1] * n + [0] * (seq - n) for n in lengths], np.int32)


@pytest.mark.parametrize("lengths, multiple, expected", [
    ([5, 9, 13], 8, 16),
    ([5, 16], 8, 16),  # a multiple stays
    ([5, 17], 8, 24),
    ([39, 2], 8, SEQ),  # 40 would round to 40; 39 -> 40, never above max_seq_length
    ([33], 16, SEQ),  # 48 capped at 40
    ([0, 0], 8, 8),  # no tokens at all: still one step long
    ([3], 1, 3),
])
def test_length_is_the_longest_row_rounded_up(lengths, multiple, expected):
    padding = DynamicPadding(SEQ, multiple)
    assert int(padding.length(_mask(lengths))) == expected


def test_cut_shortens_every_sequence_feature_and_nothing_else():
    padding = DynamicPadding(SEQ, 8)
    mask = _mask([5, 9, 11])
    inputs = {"input_ids": tf.constant(mask * 7), "input_mask": tf.constant(mask),
              "token_type_ids": tf.constant(mask * 0), "label_weights": tf.constant(
                  mask.astype(np.float32)), "label_ids": tf.constant([1, 0, 1]),
              "sentence_index": tf.constant([[4], [5], [6]]),
              "unique_ids": tf.constant([7, 8, 9], tf.int64)}
    cut = padding.cut(inputs)
    for name in ("input_ids", "input_mask", "token_type_ids", "label_weights"):
        assert cut[name].shape == (3, 16), name
        np.testing.assert_array_equal(cut[name], inputs[name][:, :16])
    for name in ("label_ids", "sentence_index", "unique_ids"):
        assert cut[name] is inputs[name], name
    assert FixedPadding().cut(inputs) is inputs


def test_multiple_choice_is_cut_to_its_longest_choice():
    padding = DynamicPadding(SEQ, 8)
    mask = np.stack([_mask([3, 4, 21, 5]), _mask([6, 6, 6, 6])])  # [B=2, C=4, T]
    cut = padding.cut({"input_ids": tf.constant(mask), "input_mask": tf.constant(mask),
                       "label_ids": tf.constant([2, 0])})
    assert cut["input_ids"].shape == (2, 4, 24) and cut["label_ids"].shape == (2,)
    # One record's flat [C * T] mask (what bucketing reads) gives the same length.
    assert int(padding.length(mask[0].reshape(-1))) == 24


def test_padding_options_are_checked():
    with pytest.raises(ValueError, match="padding multiple 0"):
        DynamicPadding(SEQ, 0)


def test_concatenate_padded_brings_batches_to_one_length():
    parts = [np.ones([2, 16], np.float32), np.full([1, 24], 2, np.float32)]
    joined = concatenate_padded(parts, SEQ, pad_value=-np.inf)
    assert joined.shape == (3, SEQ)
    np.testing.assert_array_equal(joined[:2, :16], 1)
    np.testing.assert_array_equal(joined[2, :24], 2)
    assert np.all(joined[:2, 16:] == -np.inf) and np.all(joined[2, 24:] == -np.inf)
    assert concatenate_padded(parts).shape == (3, 24)  # no length: the longest, zeros
    assert concatenate_padded([np.ones([2, 3]), np.ones([1, 3])]).shape == (3, 3)
    with pytest.raises(ValueError, match="length 24 on axis 1 cannot be padded to 16"):
        concatenate_padded(parts, 16)


@pytest.fixture(scope="module")
def classifier_records(tmp_path_factory):
    """60 classifier records at SEQ tokens whose real lengths run from 4 to 40, shuffled."""
    directory = tmp_path_factory.mktemp("records")
    vocab = directory / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + WORDS) + "\n")
    tokenizer = tokenization.FullTokenizer(str(vocab), do_lower_case=True)
    rng = np.random.default_rng(5)
    examples = []
    for index in range(60):
        words = rng.choice(WORDS, size=1 + index % 37).tolist()  # 1 + [CLS], [SEP]: 3..40
        examples.append(classifier_data.InputExample(str(index), " ".join(words),
                                                     label=str(index % 2)))
    examples = [examples[i] for i in rng.permutation(len(examples))]
    path = str(directory / "train.tf_record")
    classifier_data.write_features(examples, ["0", "1"], SEQ, tokenizer, path)
    return path


def _batches(path, padding, is_training=True, count=12, seed=3, skip_batches=0,
             batch_size=4):
    dataset = classifier_dataset(path, batch_size, SEQ, False, is_training, seed=seed,
                                 skip_batches=skip_batches, padding=padding)
    return [{name: value.numpy() for name, value in batch.items()}
            for batch in dataset.take(count)]


def test_dynamic_batches_are_the_fixed_ones_cut_short(classifier_records):
    padding = DynamicPadding(SEQ, 8)
    for is_training in (True, False):
        fixed = _batches(classifier_records, None, is_training)
        dynamic = _batches(classifier_records, padding, is_training)
        assert len(fixed) == len(dynamic) == 12
        lengths = [batch["input_ids"].shape[1] for batch in dynamic]
        assert min(lengths) < SEQ and all(length % 8 == 0 for length in lengths), lengths
        for whole, cut in zip(fixed, dynamic):
            assert whole["input_ids"].shape[1] == SEQ
            length = cut["input_ids"].shape[1]
            assert length == min(SEQ, -(-whole["input_mask"].sum(1).max() // 8) * 8)
            assert not whole["input_mask"][:, length:].any()  # only padding was cut
            for name, value in cut.items():
                np.testing.assert_array_equal(value, whole[name][:, :length]
                                              if value.ndim == 2 else whole[name], name)


def test_length_buckets_are_deterministic_resume_and_hold_one_length(classifier_records):
    padding = LengthBuckets(SEQ, 8)
    whole = _batches(classifier_records, padding)
    for batch in whole:  # each batch: rows of one padded length
        rows = np.minimum(-(-batch["input_mask"].sum(1) // 8) * 8, SEQ)
        assert set(rows) == {batch["input_ids"].shape[1]}, rows
    assert len({batch["input_ids"].shape[1] for batch in whole}) > 1
    again = _batches(classifier_records, padding)
    resumed = _batches(classifier_records, padding, skip_batches=5, count=7)
    for first, second in zip(whole, again):
        assert first.keys() == second.keys()
        for name in first:
            np.testing.assert_array_equal(first[name], second[name])
    for first, second in zip(whole[5:], resumed):
        np.testing.assert_array_equal(first["input_ids"], second["input_ids"])
    other_seed = _batches(classifier_records, padding, seed=4)
    assert any(a["input_ids"].shape != b["input_ids"].shape
               or (a["input_ids"] != b["input_ids"]).any() for a, b in zip(whole, other_seed))
    # Less padding than batching in stream order, over the same steps.
    unbucketed = _batches(classifier_records, DynamicPadding(SEQ, 8))
    assert (sum(b["input_ids"].size for b in whole)
            < sum(b["input_ids"].size for b in unbucketed))


def test_evaluation_is_never_bucketed(classifier_records):
    bucketed = _batches(classifier_records, LengthBuckets(SEQ, 8), is_training=False)
    plain = _batches(classifier_records, DynamicPadding(SEQ, 8), is_training=False)
    for first, second in zip(bucketed, plain):
        np.testing.assert_array_equal(first["input_ids"], second["input_ids"])
        np.testing.assert_array_equal(first["example_index"], second["example_index"])
