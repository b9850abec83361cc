"""modeling/tasks/squad.py: the span model's input pipeline, loss and raw results."""
import numpy as np
import pytest
import tensorflow as tf

from modeling.data import squad as squad_data
from modeling.tasks import squad
from modeling.training.trainer import Trainer


def _features(count, seq=5):
    return [squad_data.InputFeatures(
        unique_id=1000000000 + i, example_index=i, doc_span_index=0, tokens=[],
        token_to_orig_map={}, token_is_max_context={}, input_ids=[i + 2] * seq,
        input_mask=[1] * (seq - i) + [0] * i, segment_ids=[0, 0, 1, 1, 1][:seq],
        start_position=i, end_position=i + 1, is_impossible=i == 2) for i in range(count)]


@pytest.mark.parametrize("is_training", [True, False])
def test_dataset_reads_what_the_data_module_writes(tmp_path, is_training):
    path = str(tmp_path / "features.tf_record")
    writer = squad_data.FeatureWriter(path, is_training)
    features = _features(3)
    for feature in features:
        writer.process_feature(feature)
    writer.close()
    # Training: repeated and shuffled; every record read is one of those written.
    dataset = (squad.squad_dataset(path, 3, 5, is_training=True).take(4) if is_training
               else squad.squad_dataset(path, 2, 5, is_training=False))
    batches = list(dataset)
    batch = {name: np.concatenate([b[name] for b in batches]) for name in batches[0]}
    assert batch["unique_ids"].dtype == np.int64
    assert set(batch["unique_ids"]) <= {f.unique_id for f in features}
    index = batch["unique_ids"] - 1000000000
    np.testing.assert_array_equal(batch["input_ids"], [features[i].input_ids for i in index])
    np.testing.assert_array_equal(batch["input_mask"], [features[i].input_mask for i in index])
    np.testing.assert_array_equal(batch["token_type_ids"],
                                  [features[i].segment_ids for i in index])
    if is_training:
        np.testing.assert_array_equal(batch["start_positions"], index)
        np.testing.assert_array_equal(batch["end_positions"], index + 1)
        np.testing.assert_array_equal(batch["is_impossible"], index == 2)
    else:
        np.testing.assert_array_equal(index, [0, 1, 2])
        assert "start_positions" not in batch


def test_a_window_of_another_length_is_refused(tmp_path):
    writer = squad_data.FeatureWriter(str(tmp_path / "f.tf_record"), is_training=False)
    writer.process_feature(_features(1, seq=5)[0])
    with pytest.raises(ValueError, match="'input_ids' has 4 values; its schema says 5"):
        writer.process_feature(_features(1, seq=4)[0])


def test_the_loss_is_the_replicas_share_of_the_global_batch(tiny_config, tiny_inputs):
    task = squad.SquadTask()
    trainer = Trainer(task, tf.distribute.get_strategy(), tiny_config, 1e-3, 10, 1)
    batch = dict(tiny_inputs, start_positions=np.array([1, 0, 2]),
                 end_positions=np.array([3, 0, 2]))
    outputs = trainer.model(batch)
    loss, metrics = task.replica_loss(outputs, batch, tf.constant(12.0))
    np.testing.assert_allclose(loss, float(outputs["loss"]) * 3 / 12, rtol=1e-6)
    assert float(metrics["examples"]) == 3
    # The pooler feeds no output: it is not among the variables trained.
    names = [v.path for v in trainer.trained_variables]
    assert not any(name.startswith("bert/pooler/") for name in names)
    assert len(names) == len(trainer.model.trainable_variables) - 2


def test_raw_results_are_the_unique_ids_and_both_logits():
    class Predicted:
        def predict(self, dataset, names, lengths, pad_value, **progress):
            # The logits come back at max_seq_length, -inf where dynamic padding cut them.
            assert lengths == {"start_logits": 3, "end_logits": 3} and pad_value == -np.inf
            return {"unique_ids": np.array([1000000001, 1000000000]),
                    "start_logits": np.zeros((2, 3)), "end_logits": np.ones((2, 3))}
    unique_ids, start, end = squad.predict_logits(Predicted(), None, 3)
    np.testing.assert_array_equal(unique_ids, [1000000001, 1000000000])
    assert start.shape == end.shape == (2, 3) and end.sum() == 6
