"""modeling/tasks/classifier.py: the classifier's input pipeline, loss, metrics and outputs."""
import numpy as np
import pytest

from modeling.data import classifier as classifier_data
from modeling.tasks import classifier

EXAMPLES = [classifier_data.InputExample("0", "the keeper lit the lamp", "a ship passed", "b"),
            classifier_data.InputExample("1", "she walks away", None, "a"),
            classifier_data.PaddingInputExample()]


@pytest.mark.parametrize("label_list, labels", [(["a", "b"], [1, 0, 0]), ([], [2.5, 0.25, 0.0])])
def test_dataset_reads_what_the_data_module_writes(word_tokenizer, tmp_path, label_list,
                                                   labels):
    examples = EXAMPLES if label_list else [
        classifier_data.InputExample(e.guid, e.text_a, e.text_b, str(label))
        for e, label in zip(EXAMPLES[:2], labels)] + EXAMPLES[2:]
    path = str(tmp_path / "eval.tf_record")
    assert classifier_data.write_features(examples, label_list, 11, word_tokenizer, path) == 3
    batches = list(classifier.classifier_dataset(path, 2, 11, regression=not label_list,
                                                 is_training=False))
    batch = {name: np.concatenate([b[name] for b in batches]) for name in batches[0]}
    expected = [classifier_data.convert_single_example(e, label_list, 11, word_tokenizer)
                for e in examples]
    np.testing.assert_array_equal(batch["input_ids"], [f.input_ids for f in expected])
    np.testing.assert_array_equal(batch["input_mask"], [f.input_mask for f in expected])
    np.testing.assert_array_equal(batch["token_type_ids"], [f.segment_ids for f in expected])
    np.testing.assert_array_equal(batch["label_ids"], labels)
    assert batch["label_ids"].dtype == (np.float32 if not label_list else np.int32)
    np.testing.assert_array_equal(batch["is_real_example"], [1, 1, 0])
    np.testing.assert_array_equal(batch["example_index"], [0, 1, 2])
