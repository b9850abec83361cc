"""Contextual embeddings as features (the paper's section 5.3), as the original
`extract_features.py` computes and writes them."""
import collections
import json

import numpy as np
import tensorflow as tf

from modeling.checkpoints import name_based
from modeling.data import text
from modeling.encoder.bert_model import BertModel
from modeling.encoder.config import BertConfig
from modeling.runtime import files
from modeling.text import tokenization
from modeling.training.options import (check_max_seq_length, check_vocabulary,
                                       require_positive)
from modeling.training.progress import PassProgress


def layer_outputs(model, features, layer_indexes, batch_size):
    """Runs the encoder over the features in batches.

    Args:
      model: a `BertModel`.
      features: list of `InputFeatures`, all of one sequence length T.
      layer_indexes: list of int, indices into the encoder layers (-1 is the last).
      batch_size: int.

    Yields:
      (feature, {layer_index: float32 numpy [T, H]}) in input order.
    """
    num_layers = model.config.num_hidden_layers
    for index in layer_indexes:
        if not -num_layers <= index < num_layers:
            raise ValueError(f"Layer index {index} is outside the model's {num_layers} layers")
    signature = {name: tf.TensorSpec([None, None], tf.int32)
                 for name in ("input_ids", "input_mask", "token_type_ids")}

    @tf.function(input_signature=[signature], autograph=False)
    def encode(inputs):
        outputs = model(inputs, training=False)["encoder_outputs"]
        return [outputs[index] for index in layer_indexes]

    for start in range(0, len(features), batch_size):
        batch = features[start:start + batch_size]
        results = encode({
            "input_ids": np.array([f.input_ids for f in batch], np.int32),
            "input_mask": np.array([f.input_mask for f in batch], np.int32),
            "token_type_ids": np.array([f.input_type_ids for f in batch], np.int32),
        })
        results = [result.numpy() for result in results]
        for row, feature in enumerate(batch):
            yield feature, {index: result[row] for index, result in zip(layer_indexes, results)}


def to_json_line(feature, layers):
    """The original's JSON-lines record: one entry per token, values rounded to 6 decimals."""
    tokens = []
    for position, token in enumerate(feature.tokens):
        tokens.append(collections.OrderedDict([
            ("token", token),
            ("layers", [collections.OrderedDict([
                ("index", index),
                ("values", [round(float(x), 6) for x in values[position]]),
            ]) for index, values in layers.items()]),
        ]))
    record = collections.OrderedDict([("linex_index", feature.unique_id), ("features", tokens)])
    return json.dumps(record) + "\n"


def read_token_vectors(json_line, layer_indexes=None):
    """Reads one record of extract_features.py's output as features for a downstream model.

    The paper's best feature-based NER input (section 5.3) concatenates the top four layers'
    hidden states of each token (`--layers=-1,-2,-3,-4`).

    Args:
      json_line: str, one line of the output JSON.
      layer_indexes: the layers to concatenate, in this order; each must be in the record.
        By default all the record's layers, in the record's order (its --layers).

    Returns:
      (tokens, vectors): the record's tokens ("[CLS]" ... "[SEP]"), and float32 numpy
      [tokens, len(layer_indexes) * H].

    Raises:
      ValueError: a layer that extract_features.py was not asked for (its --layers).
    """
    record = json.loads(json_line)
    tokens, rows = [], []
    for feature in record["features"]:
        by_index = {layer["index"]: layer["values"] for layer in feature["layers"]}
        if layer_indexes is None:
            layer_indexes = [layer["index"] for layer in feature["layers"]]
        missing = [index for index in layer_indexes if index not in by_index]
        if missing:
            raise ValueError(f"line {record['linex_index']}: layers {missing} are not in the "
                             f"record (it has {sorted(by_index)}); run extract_features.py "
                             f"with --layers={','.join(map(str, layer_indexes))}")
        tokens.append(feature["token"])
        rows.append(np.concatenate([by_index[index] for index in layer_indexes]))
    return tokens, np.asarray(rows, np.float32)


def parse_layers(text):
    """--layers: comma-separated ints, "-1,-2,-3,-4" -> [-1, -2, -3, -4]."""
    try:
        return [int(index) for index in text.split(",")]
    except ValueError:
        raise ValueError(f"--layers={text} is not a comma-separated list of layer indexes "
                         f"such as -1,-2,-3,-4") from None


def run(input_file, output_file, bert_config_file, init_checkpoint, vocab_file,
        layers="-1,-2,-3,-4", do_lower_case=True, max_seq_length=128, batch_size=32,
        progress_seconds=30.0, allow_fewer_layers=False):
    """The original `extract_features.py`: one JSON line per input line to `output_file`,
    written atomically, with the hidden states of `layers` for every token.
    `allow_fewer_layers`: a config of fewer layers than the checkpoint takes its first ones."""
    layer_indexes = parse_layers(layers)
    for flag, path in (("--input_file", input_file), ("--vocab_file", vocab_file),
                       ("--bert_config_file", bert_config_file)):
        files.check_input(path, flag)
    files.check_outputs([output_file], [input_file, vocab_file, bert_config_file])
    require_positive("batch_size", batch_size)
    require_positive("progress_seconds", progress_seconds)
    try:
        init_checkpoint = name_based.resolve_checkpoint(init_checkpoint)
    except ValueError as error:
        raise ValueError(f"--init_checkpoint={init_checkpoint}: {error}") from None
    config = BertConfig.from_json_file(bert_config_file)
    check_max_seq_length(max_seq_length, config, bert_config_file)
    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case)
    check_vocabulary(tokenizer, config, vocab_file, bert_config_file)
    examples = text.read_examples(input_file)
    features = text.convert_examples_to_features(examples, max_seq_length, tokenizer)
    model = BertModel(config)
    # The pooler is not among the features; Hugging Face's masked-LM models have none.
    name_based.load_original(model, init_checkpoint, optional=model.OPTIONAL_VARIABLES,
                             allow_fewer_layers=allow_fewer_layers)
    progress = PassProgress("extract_features", len(features), "examples", progress_seconds)
    with files.atomic_write(output_file) as writer:
        for feature, outputs in layer_outputs(model, features, layer_indexes, batch_size):
            writer.write(to_json_line(feature, outputs))
            progress.add(1)
    progress.finish()
