"""Contextual embeddings as features (the paper's section 5.3), as the original
`extract_features.py` computes and writes them."""
import collections
import dataclasses
import json
import re

import numpy as np

from modeling import pretraining_pipeline

_PAIR = re.compile(r"^(.*) \|\|\| (.*)$")


@dataclasses.dataclass
class InputExample:
    unique_id: int
    text_a: str
    text_b: str = None


@dataclasses.dataclass
class InputFeatures:
    """One packed sequence: `tokens` unpadded; the id lists padded to the sequence length."""
    unique_id: int
    tokens: list
    input_ids: list
    input_mask: list
    input_type_ids: list


def read_examples(input_file):
    """Reads one example per line: `text` or `text_a ||| text_b`.

    Lines are split on "\\n" alone and every "\\r" is dropped, as the original's `tf.gfile`
    reader does; a blank line is an (empty) example, as in the original.

    Raises:
      ValueError: a line is not valid UTF-8 (the original crashes there); names file and line.
    """
    import tensorflow as tf  # here: the packing below serves data modules without TensorFlow
    with tf.io.gfile.GFile(input_file, "rb") as reader:
        data = reader.read()
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    examples = []
    for number, raw in enumerate(lines, start=1):
        line = pretraining_pipeline.decode_line(raw, input_file, number).strip()
        match = _PAIR.match(line)
        text_a, text_b = (line, None) if match is None else match.groups()
        examples.append(InputExample(unique_id=len(examples), text_a=text_a, text_b=text_b))
    return examples


def truncate_seq_pair(tokens_a, tokens_b, max_length):
    """Pops tokens from the end of the longer list until the pair fits, in place.

    Trimming the longer one keeps more of the shorter, which carries as much meaning per token.
    """
    while len(tokens_a) + len(tokens_b) > max_length:
        longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        longer.pop()


def convert_examples_to_features(examples, seq_length, tokenizer):
    """Tokenizes and packs `[CLS] a [SEP] (b [SEP])`, truncating and padding to `seq_length`.

    Returns:
      A list of `InputFeatures`, one per example.
    """
    features = []
    for example in examples:
        tokens_a = tokenizer.tokenize(example.text_a)
        tokens_b = tokenizer.tokenize(example.text_b) if example.text_b else None
        if tokens_b:
            truncate_seq_pair(tokens_a, tokens_b, seq_length - 3)  # [CLS], [SEP], [SEP]
        else:
            tokens_a = tokens_a[:seq_length - 2]  # [CLS], [SEP]
        tokens = ["[CLS]"] + tokens_a + ["[SEP]"]
        input_type_ids = [0] * len(tokens)
        if tokens_b:
            tokens += tokens_b + ["[SEP]"]
            input_type_ids += [1] * (len(tokens_b) + 1)
        input_ids = tokenizer.convert_tokens_to_ids(tokens)
        padding = [0] * (seq_length - len(tokens))
        features.append(InputFeatures(
            unique_id=example.unique_id, tokens=tokens, input_ids=input_ids + padding,
            input_mask=[1] * len(tokens) + padding, input_type_ids=input_type_ids + padding))
    return features


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
    import tensorflow as tf
    num_layers = model.config.num_hidden_layers
    for index in layer_indexes:
        if not -num_layers <= index < num_layers:
            raise ValueError(f"Layer index {index} is outside the model's {num_layers} layers")
    signature = {name: tf.TensorSpec([None, None], tf.int32)
                 for name in ("input_ids", "input_mask", "token_type_ids")}

    @tf.function(input_signature=[signature])
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


def read_token_vectors(json_line, layer_indexes=(-1, -2, -3, -4)):
    """Reads one record of extract_features.py's output as features for a downstream model.

    The paper's best feature-based NER input (section 5.3) concatenates the top four layers'
    hidden states of each token.

    Args:
      json_line: str, one line of the output JSON.
      layer_indexes: the layers to concatenate, in this order; each must be in the record.

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
        missing = [index for index in layer_indexes if index not in by_index]
        if missing:
            raise ValueError(f"line {record['linex_index']}: layers {missing} are not in the "
                             f"record (it has {sorted(by_index)}); run extract_features.py "
                             f"with --layers={','.join(map(str, layer_indexes))}")
        tokens.append(feature["token"])
        rows.append(np.concatenate([by_index[index] for index in layer_indexes]))
    return tokens, np.asarray(rows, np.float32)
