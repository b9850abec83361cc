import json

import pytest

from conftest import HF_GOLDEN
from modeling import BertConfig
from modeling.checkpoints import huggingface_config

# Keys transformers writes that to_hf leaves out, with transformers' values: its defaults, so
# leaving them out loads the same model.
LEFT_OUT = {"add_cross_attention": False, "bos_token_id": None, "classifier_dropout": None,
            "dtype": "float32", "eos_token_id": None, "is_decoder": False, "pad_token_id": 0,
            "tie_word_embeddings": True, "use_cache": True}


def _golden_classes():
    return json.loads((HF_GOLDEN / "transformers_classes.json").read_text())["classes"]


def _hf(**changes):
    fields = {"model_type": "bert", "vocab_size": 99, "hidden_size": 32,
              "num_attention_heads": 4, "hidden_act": "gelu"}
    fields.update(changes)
    return fields


@pytest.mark.parametrize("hf_act, gelu, ours", [
    ("gelu", "exact", "gelu_exact"), ("gelu", "approximate", "gelu"),
    ("gelu_new", "exact", "gelu"), ("gelu_new", "approximate", "gelu"),
    ("gelu_pytorch_tanh", "exact", "gelu"), ("gelu_fast", "exact", "gelu"),
    ("relu", "approximate", "relu"), ("tanh", "exact", "tanh"),
])
def test_activation_names(hf_act, gelu, ours):
    config = huggingface_config.from_hf(_hf(hidden_act=hf_act), gelu)
    assert config.hidden_act == ours
    back = huggingface_config.to_hf(config, "BertModel")["hidden_act"]
    # The exact form comes back as "gelu", the tanh approximation as "gelu_new".
    assert back == {"gelu_exact": "gelu", "gelu": "gelu_new"}.get(ours, ours)


def test_fields_map_and_missing_ones_take_transformers_defaults():
    config = huggingface_config.from_hf(_hf(type_vocab_size=3, layer_norm_eps=1e-7,
                                   max_position_embeddings=64, num_hidden_layers=2,
                                   intermediate_size=37, initializer_range=0.05,
                                   hidden_dropout_prob=0.2, pad_token_id=0, use_cache=True))
    assert (config.type_vocab_size, config.layer_norm_eps, config.max_position_embeddings,
            config.num_hidden_layers, config.intermediate_size, config.initializer_range,
            config.hidden_dropout_prob) == (3, 1e-7, 64, 2, 37, 0.05, 0.2)
    defaults = huggingface_config.from_hf({"model_type": "bert"})
    assert (defaults.type_vocab_size, defaults.hidden_size, defaults.layer_norm_eps,
            defaults.hidden_act) == (2, 768, 1e-12, "gelu_exact")


@pytest.mark.parametrize("changes, words", [
    ({"model_type": "roberta"}, ["config.json", "'roberta'", "not BERT"]),
    ({"model_type": None}, ["model_type None"]),
    ({"position_embedding_type": "relative_key"}, ["position_embedding_type",
                                                   "'relative_key'"]),
    ({"is_decoder": True}, ["is_decoder"]),
    ({"add_cross_attention": True}, ["add_cross_attention"]),
    ({"hidden_act": "silu"}, ["hidden_act", "'silu'"]),
    ({"hidden_size": 30}, ["config.json", "hidden_size (30)"]),
])
def test_what_is_not_bert_is_refused_by_name(changes, words):
    with pytest.raises(ValueError) as error:
        huggingface_config.from_hf(_hf(**changes), source="x/config.json")
    for word in words:
        assert word in str(error.value)


@pytest.mark.parametrize("name", huggingface_config.ARCHITECTURES)
def test_config_json_is_what_transformers_writes(name):
    saved = _golden_classes()[name]["config"]
    config = huggingface_config.from_hf(saved)
    assert config == BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2,
                                num_attention_heads=4, intermediate_size=37,
                                max_position_embeddings=23, type_vocab_size=3,
                                hidden_act="gelu_exact")
    num_labels = len(saved["id2label"]) if name in huggingface_config.LABELED else None
    ours = huggingface_config.to_hf(config, name, num_labels)
    assert ours == {key: saved[key] for key in ours}
    left_out = {key: saved[key] for key in set(saved) - set(ours)}
    if name not in huggingface_config.LABELED:  # labels the class does not read (QA: the default 2)
        left_out.pop("id2label", None)
        left_out.pop("label2id", None)
    assert left_out == LEFT_OUT


def test_label_names_are_kept_for_the_way_back():
    config = BertConfig(vocab_size=99, hidden_size=32, num_attention_heads=4,
                        id2label={"0": "O", "1": "B-PER", "2": "I-PER"})
    ours = huggingface_config.to_hf(config, "BertForTokenClassification", 3)
    assert ours["id2label"] == {"0": "O", "1": "B-PER", "2": "I-PER"}
    assert ours["label2id"] == {"O": 0, "B-PER": 1, "I-PER": 2}
    # Names that do not fit the head's size are not used.
    assert huggingface_config.to_hf(config, "BertForSequenceClassification", 2)["id2label"] == {
        "0": "LABEL_0", "1": "LABEL_1"}


def test_a_left_to_right_model_is_refused_on_the_way_to_hugging_face():
    config = BertConfig(vocab_size=10, hidden_size=8, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=16, causal_attention=True)
    with pytest.raises(ValueError, match=r"^a left-to-right model \(causal_attention"):
        huggingface_config.to_hf(config, "BertModel")
