"""modeling/tasks/pretraining.py: pre-training's input pipeline, record checks, loss and eval."""
import numpy as np
import pytest

from modeling.data import pretraining as pretraining_data
from modeling.data import records
from modeling.tasks import pretraining

INSTANCES = [pretraining_data.Instance([2, 7, 4, 3, 9, 3], [0, 0, 0, 0, 1, 1], [2], [8], True),
             pretraining_data.Instance([2, 5, 3, 4, 3], [0, 0, 0, 1, 1], [1, 3], [6, 4], False)]


def _write(path, instances, vocab_size=10, max_seq_length=8, max_predictions_per_seq=3):
    encoder = pretraining_data.ExampleEncoder(vocab_size, max_seq_length,
                                              max_predictions_per_seq)
    with open(path, "wb") as writer:
        for instance in instances:
            writer.write(records.frame(encoder.encode(instance)))
    return str(path)


def test_dataset_reads_what_the_data_module_writes(tmp_path):
    path = _write(tmp_path / "a.tfrecord", INSTANCES)
    (batch,) = list(pretraining.pretraining_dataset([path], 4, 8, 3, is_training=False))
    np.testing.assert_array_equal(batch["input_ids"], [[2, 7, 4, 3, 9, 3, 0, 0],
                                                       [2, 5, 3, 4, 3, 0, 0, 0]])
    np.testing.assert_array_equal(batch["input_mask"], [[1] * 6 + [0] * 2, [1] * 5 + [0] * 3])
    np.testing.assert_array_equal(batch["token_type_ids"], [[0, 0, 0, 0, 1, 1, 0, 0],
                                                            [0, 0, 0, 1, 1, 0, 0, 0]])
    np.testing.assert_array_equal(batch["masked_lm_positions"], [[2, 0, 0], [1, 3, 0]])
    np.testing.assert_array_equal(batch["masked_lm_ids"], [[8, 0, 0], [6, 4, 0]])
    np.testing.assert_array_equal(batch["masked_lm_weights"], [[1, 0, 0], [1, 1, 0]])
    np.testing.assert_array_equal(batch["next_sentence_labels"], [[1], [0]])
    assert batch["input_ids"].dtype == np.int32 and batch["masked_lm_weights"].dtype == np.float32


@pytest.mark.parametrize("sizes, vocab_size, message", [
    ((9, 3), 10, r"a.tfrecord: input_ids has 8 values but --max_seq_length says 9"),
    ((8, 2), 10, r"a.tfrecord: masked_lm_positions has 3 values but --max_predictions_per_seq "
                 r"says 2"),
    ((8, 3), 9, r"a.tfrecord: input_ids contains 9, but the config's vocab_size is 9"),
])
def test_check_records_names_the_file_the_feature_and_the_flag(tmp_path, sizes, vocab_size,
                                                              message):
    path = _write(tmp_path / "a.tfrecord", INSTANCES)
    pretraining.check_records([path], 8, 3, 10)  # fits
    with pytest.raises(ValueError, match=message):
        pretraining.check_records([path], *sizes, vocab_size)


def test_check_records_refuses_an_empty_file(tmp_path):
    (tmp_path / "empty.tfrecord").write_bytes(b"")
    with pytest.raises(ValueError, match="empty.tfrecord: no records"):
        pretraining.check_records([str(tmp_path / "empty.tfrecord")], 8, 3, 10)
