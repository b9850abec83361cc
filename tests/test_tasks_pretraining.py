"""modeling/tasks/pretraining.py: pre-training's input pipeline, record checks, loss and eval."""
import numpy as np
import pytest
import tensorflow as tf

from modeling.data import pretraining as pretraining_data
from modeling.data import records
from modeling.tasks import pretraining
from modeling.training.trainer import Trainer

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


def test_the_losses_are_the_replicas_share_of_the_global_counts(tiny_config):
    objective = pretraining.MaskedLMNextSentenceObjective()
    trainer = Trainer(objective, tf.distribute.get_strategy(), tiny_config, 1e-3, 10, 1)
    rng = np.random.default_rng(4)
    batch = {"input_ids": rng.integers(1, 99, (3, 7)).astype("int32"),
             "input_mask": np.ones((3, 7), "int32"), "token_type_ids": np.zeros((3, 7), "int32"),
             "masked_lm_positions": np.array([[1, 2], [3, 0], [4, 5]], "int32"),
             "masked_lm_ids": np.array([[5, 6], [7, 0], [8, 9]], "int32"),
             "masked_lm_weights": np.array([[1, 1], [1, 0], [1, 1]], "float32"),
             "next_sentence_labels": np.array([[0], [1], [1]], "int32")}
    outputs = trainer.model(batch)
    # With this batch's own counts, the model's losses; with twice the counts, half of each.
    loss, counts = objective.replica_loss(outputs, batch, tf.constant(5.0), tf.constant(3.0))
    np.testing.assert_allclose(loss, outputs["total_loss"], rtol=1e-5)
    half, _ = objective.replica_loss(outputs, batch, tf.constant(10.0 - 1e-5), tf.constant(6.0))
    np.testing.assert_allclose(half, float(outputs["total_loss"]) / 2, rtol=1e-5)
    assert float(counts["mlm_weight"]) == 5 and float(counts["examples"]) == 3
    np.testing.assert_allclose(counts["mlm_loss_sum"],
                               np.sum(outputs["masked_lm_example_loss"] *
                                      batch["masked_lm_weights"]), rtol=1e-5)


def test_evaluate_reports_the_originals_metrics(tmp_path, tiny_config):
    path = _write(tmp_path / "a.tfrecord", INSTANCES * 3)
    objective = pretraining.MaskedLMNextSentenceObjective()
    trainer = Trainer(objective, tf.distribute.get_strategy(), tiny_config, 1e-3, 10, 1)
    dataset = pretraining.pretraining_dataset([path], 2, 8, 3, is_training=False)
    results = objective.evaluate(trainer, dataset, max_eval_steps=2)
    assert sorted(results) == ["global_step", "loss", "masked_lm_accuracy", "masked_lm_loss",
                               "next_sentence_accuracy", "next_sentence_loss"]
    assert results["global_step"] == 0 and 0 <= results["masked_lm_accuracy"] <= 1
    assert results["loss"] > results["masked_lm_loss"] > 0


def test_input_files_are_comma_separated_globs(tmp_path):
    for name in ("b.tfrecord", "a.tfrecord", "c.txt"):
        (tmp_path / name).write_bytes(b"")
    pattern = str(tmp_path / "*.tfrecord")
    paths = pretraining.expand_files(f"{pattern},{tmp_path / 'c.txt'}")
    assert sorted(paths[:2]) == [str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord")]
    assert paths == tf.io.gfile.glob(pattern) + [str(tmp_path / "c.txt")]
