"""modeling/tasks/multiple_choice.py: SWAG's input pipeline, loss and evaluation."""
import csv
import types

import numpy as np
import tensorflow as tf

from modeling.data import multiple_choice as multiple_choice_data
from modeling.tasks import multiple_choice
from modeling.training.trainer import Trainer


def test_dataset_reads_what_the_data_module_writes(word_tokenizer, tmp_path):
    examples = [multiple_choice_data.SwagExample("7", "the keeper lit",
                                                 ["a lamp", "the ship", "she walks", "away"], 2),
                multiple_choice_data.SwagExample("8", "a ship", ["passed"] * 4),
                multiple_choice_data.PaddingInputExample()]
    path = str(tmp_path / "eval.tf_record")
    assert multiple_choice_data.write_features(examples, 6, word_tokenizer, path) == 3
    batches = list(multiple_choice.swag_dataset(path, 2, 6, is_training=False))
    batch = {name: np.concatenate([b[name] for b in batches]) for name in batches[0]}
    expected = [multiple_choice_data.convert_example(e, 6, word_tokenizer) for e in examples]
    assert batch["input_ids"].shape == (3, 4, 6)
    np.testing.assert_array_equal(batch["input_ids"], [f.input_ids for f in expected])
    np.testing.assert_array_equal(batch["input_mask"], [f.input_mask for f in expected])
    np.testing.assert_array_equal(batch["token_type_ids"], [f.segment_ids for f in expected])
    np.testing.assert_array_equal(batch["label_ids"], [2, 0, 0])
    np.testing.assert_array_equal(batch["is_real_example"], [1, 1, 0])


def test_the_loss_is_the_replicas_share_of_the_global_batch(tiny_config):
    task = multiple_choice.MultipleChoiceTask("unused")
    trainer = Trainer(task, tf.distribute.get_strategy(), tiny_config, 1e-3, 10, 1)
    rng = np.random.default_rng(1)
    batch = {"input_ids": rng.integers(1, 99, (2, 4, 5)).astype("int32"),
             "input_mask": np.ones((2, 4, 5), "int32"),
             "token_type_ids": np.zeros((2, 4, 5), "int32"), "label_ids": np.array([3, 0])}
    outputs = trainer.model(batch)
    loss, metrics = task.replica_loss(outputs, batch, tf.constant(8.0))
    np.testing.assert_allclose(loss, float(outputs["loss"]) * 2 / 8, rtol=1e-6)
    assert float(metrics["correct"]) == np.sum(np.argmax(outputs["logits"], -1) == [3, 0])
    assert float(metrics["examples"]) == 2


def test_evaluation_counts_only_real_examples():
    class Predicted:
        global_step = 4

        def predict(self, dataset, names, **progress):
            return {"probabilities": np.array([[0.1, 0.7, 0.1, 0.1], [0.4, 0.3, 0.2, 0.1],
                                               [0.25] * 4]),
                    "per_example_loss": np.array([0.5, 1.5, 9.0]),
                    "label_ids": np.array([1, 2, 0]), "is_real_example": np.array([1, 1, 0])}
    results, probabilities = multiple_choice.evaluate(Predicted(), None)
    assert results == {"eval_accuracy": 0.5, "eval_loss": 1.0, "global_step": 4}
    assert probabilities.shape == (2, 4)


def test_eval_is_logged_beside_the_most_frequent_answer_and_a_random_choice():
    assert multiple_choice.against_guessing({"eval_accuracy": 0.5}, [2, 1, 2, 0]) == (
        "eval_accuracy 0.5000 (always guessing the most frequent answer, 2: 0.5000, or one of 4 "
        "at random: 0.2500)")


def test_training_examples_are_shuffled_once_by_the_seed(tmp_path):
    """SWAG's train.csv is stored by video clip: the 100-record shuffle buffer alone would
    train on it in that order."""
    with open(tmp_path / "train.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["", "video-id", "fold-ind", "startphrase", "sent1", "sent2",
                         "gold-source", "ending0", "ending1", "ending2", "ending3", "label"])
        for i in range(200):
            writer.writerow([i, f"clip{i // 10}", "0", "a b", "a", "b", "gold", "c", "d", "e",
                             "f", i % 4])
    orders = []
    for seed in (3, 3, 4):
        task = multiple_choice.MultipleChoiceTask(str(tmp_path))
        task.read(types.SimpleNamespace(do_train=True, do_eval=False, do_predict=False,
                                        seed=seed), tokenizer=None)
        orders.append([int(example.example_id) for example in task.train])
    assert sorted(orders[0]) == list(range(200))
    assert orders[0] == orders[1] != orders[2]
    assert np.mean(np.abs(np.diff(orders[0]))) > 40  # neighbours in file order differ by 1
