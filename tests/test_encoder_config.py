import json

import pytest

from modeling import BertConfig


def test_defaults_are_the_originals():
    config = BertConfig(vocab_size=30522)
    assert config.to_dict() == {
        "vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12,
        "num_attention_heads": 12, "intermediate_size": 3072, "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
        "max_position_embeddings": 512, "type_vocab_size": 16, "initializer_range": 0.02}


def test_google_config_with_extra_keys_round_trips(data):
    path = data / "checkpoints/chinese_L-12_H-768_A-12_index_only/bert_config.json"
    config = BertConfig.from_json_file(path)
    assert (config.vocab_size, config.type_vocab_size, config.size_per_head) == (21128, 2, 64)
    assert config.extra["pooler_type"] == "first_token_transform"
    assert json.loads(config.to_json_string()) == json.loads(path.read_text())
    assert BertConfig.from_dict(config.to_dict()) == config


def test_layer_norm_eps_is_written_only_when_it_differs_from_the_originals():
    assert "layer_norm_eps" not in BertConfig(vocab_size=99, layer_norm_eps=1e-12).to_dict()
    config = BertConfig(vocab_size=99, hidden_act="gelu_exact", layer_norm_eps=1e-5)
    assert config.to_dict()["layer_norm_eps"] == 1e-5
    assert BertConfig.from_dict(config.to_dict()) == config
    assert BertConfig.from_dict(config.to_dict()).hidden_act == "gelu_exact"


@pytest.mark.parametrize("changes, words", [
    ({"hidden_size": 30}, ["hidden_size (30)", "num_attention_heads (4)"]),
    ({"hidden_act": "swish"}, ["hidden_act", "'swish'"]),
    ({"num_hidden_layers": 0}, ["num_hidden_layers", "0"]),
    ({"intermediate_size": 3.5}, ["intermediate_size", "3.5"]),
    ({"hidden_dropout_prob": 1.5}, ["hidden_dropout_prob", "1.5"]),
    ({"initializer_range": -1}, ["initializer_range", "-1"]),
    ({"layer_norm_eps": 0}, ["layer_norm_eps", "0"]),
    ({"hidden_act": "gelu_new"}, ["hidden_act", "'gelu_new'", "gelu_exact"]),
])
def test_invalid_values_name_field_and_value(changes, words):
    fields = dict(vocab_size=99, hidden_size=32, num_attention_heads=4)
    fields.update(changes)
    with pytest.raises(ValueError) as error:
        BertConfig(**fields)
    for word in words:
        assert word in str(error.value)


def test_bad_file_names_the_file(tmp_path):
    path = tmp_path / "bert_config.json"
    path.write_text('{"vocab_size": 10, "hidden_size": 7, "num_attention_heads": 2}')
    with pytest.raises(ValueError, match="bert_config.json.*hidden_size"):
        BertConfig.from_json_file(path)
    path.write_text("{not json")
    with pytest.raises(ValueError, match="bert_config.json: not valid JSON"):
        BertConfig.from_json_file(path)
    path.write_text('{"hidden_size": 8}')
    with pytest.raises(ValueError, match="needs vocab_size"):
        BertConfig.from_json_file(path)
