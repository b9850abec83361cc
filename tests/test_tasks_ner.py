"""modeling/tasks/ner.py: the token classifier's input pipeline, loss and predictions."""
import numpy as np

from modeling.data import ner as ner_data
from modeling.tasks import ner


def test_dataset_reads_what_the_data_module_writes(word_tokenizer, tmp_path):
    sentences = [ner_data.Sentence(["the", "keeper", "walks"], ["O", "B-PER", "O"],
                                   ["the", "keeper", "walks"]),
                 ner_data.Sentence(["a", "ship", "passed", "safely", "."] * 2, ["O"] * 10,
                                   ["x"] * 10)]
    labels = ner_data.get_labels(sentences)
    features = ner_data.convert_sentences(sentences, labels, 7, word_tokenizer)
    assert len(features) > 2  # the long sentence is cut into windows, word ids -1 between
    path = str(tmp_path / "eval.tf_record")
    assert ner_data.write_features(features, path) == len(features)
    batches = list(ner.ner_dataset(path, 2, 7, is_training=False))
    batch = {name: np.concatenate([b[name] for b in batches]) for name in batches[0]}
    for name in ("input_ids", "input_mask", "label_ids", "label_weights", "word_ids"):
        np.testing.assert_array_equal(batch[name], [getattr(f, name) for f in features], name)
    np.testing.assert_array_equal(batch["token_type_ids"], [f.segment_ids for f in features])
    np.testing.assert_array_equal(batch["sentence_index"],
                                  [[f.sentence_index] for f in features])
    assert batch["label_weights"].dtype == np.float32
