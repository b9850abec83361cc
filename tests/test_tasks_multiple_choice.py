"""modeling/tasks/multiple_choice.py: SWAG's input pipeline, loss and evaluation."""
import numpy as np

from modeling.data import multiple_choice as multiple_choice_data
from modeling.tasks import multiple_choice


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
