"""Hugging Face BERT folders to original name-based checkpoints, and back, strictly.

A Hugging Face folder holds `config.json`, the weights (`model.safetensors`, or
`pytorch_model.bin`; either possibly sharded behind an `.index.json`) and `vocab.txt`. Every
weight has one name on each side (`tensor_names`). PyTorch's `Linear` stores its weight
[out, in] and the original's dense kernels are [in, out], so those are transposed; the
original's output layers (`output_weights`) are [out, in] already and copy unchanged.

Shape legend: V vocabulary, P max positions, S token types, H hidden, I intermediate,
L labels.
"""
import dataclasses
import json
import os

import ml_dtypes  # noqa: F401  registers bfloat16 with NumPy, so safetensors reads bf16 weights
import numpy as np
import tensorflow as tf
from absl import logging
from safetensors import SafetensorError, safe_open
from safetensors.numpy import save as safetensors_bytes

from modeling.checkpoints import huggingface_config, name_based
from modeling.encoder.bert_model import POOLER
from modeling.encoder.config import BertConfig, read_json_object
from modeling.runtime import files

# The heads that read the pooler: their weights must have it.
_READ_POOLER = ("BertForPreTraining", "BertForNextSentencePrediction",
                "BertForSequenceClassification", "BertForMultipleChoice")
# The classes whose encoder has a pooler (transformers builds the others without one); a
# BertModel may be saved without it.
_POOLED = ("BertModel",) + _READ_POOLER
# The heads stored at the original checkpoint's root (`output_weights`, `output_bias`) and in
# Hugging Face's `classifier.*`: the names alone do not tell them apart.
_ROOT_HEADS = ("BertForSequenceClassification", "BertForTokenClassification",
               "BertForMultipleChoice")
_DEFAULT_ROOT_HEAD = "BertForSequenceClassification"  # run_classifier's, the original's task
# Weight files, in the order they are looked for.
_WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                 "pytorch_model.bin.index.json")
# A Hugging Face buffer, not a weight: the positions 0..P-1.
_POSITION_IDS = "embeddings.position_ids"


@dataclasses.dataclass(frozen=True)
class TensorName:
    """One weight under both names.

    Attributes:
      hf: the name transformers saves for the class (`bert.`-prefixed but in `BertModel`).
      original: the original checkpoint name.
      shape: tuple, the original tensor's shape.
      transpose: True for a `Linear` weight, stored [out, in] by Hugging Face and as the
        kernel [in, out] by the original.
    """
    hf: str
    original: str
    shape: tuple
    transpose: bool = False

    @property
    def hf_shape(self):
        return self.shape[::-1] if self.transpose else self.shape


@dataclasses.dataclass
class Conversion:
    """What a conversion did.

    Attributes:
      architecture: the Hugging Face class of the model (one of huggingface_config.ARCHITECTURES).
      converted: the names written, in the output's naming.
      skipped: input tensors deliberately not written: Hugging Face's `position_ids` buffer
        and tied copies of the word embeddings and the masked-LM bias, optimizer state, or a
        pooler the Hugging Face class has no place for.
    """
    architecture: str
    converted: list
    skipped: list


def _linear(hf, original, inputs, outputs):
    return [TensorName(f"{hf}.weight", f"{original}/kernel", (inputs, outputs), True),
            TensorName(f"{hf}.bias", f"{original}/bias", (outputs,))]


def _layer_norm(hf, original, size):
    return [TensorName(f"{hf}.weight", f"{original}/gamma", (size,)),
            TensorName(f"{hf}.bias", f"{original}/beta", (size,))]


def _output_layer(hf, original_scope, outputs, hidden):
    """An original output layer: `output_weights` [out, H] as PyTorch's [out, in]."""
    return [TensorName(f"{hf}.weight", f"{original_scope}output_weights", (outputs, hidden)),
            TensorName(f"{hf}.bias", f"{original_scope}output_bias", (outputs,))]


def tensor_names(config, architecture, num_labels=None, pooler=None):
    """Every weight of a Hugging Face BERT class, under both names.

    Args:
      config: a `BertConfig`.
      architecture: one of huggingface_config.ARCHITECTURES.
      num_labels: int L, the outputs of a sequence or token classifier.
      pooler: whether the encoder has its pooler; by default, as transformers builds the class.

    Returns:
      A list of `TensorName`, the encoder's first.
    """
    hidden, inner = config.hidden_size, config.intermediate_size
    names = [
        TensorName("embeddings.word_embeddings.weight", "bert/embeddings/word_embeddings",
                   (config.vocab_size, hidden)),
        TensorName("embeddings.position_embeddings.weight",
                   "bert/embeddings/position_embeddings",
                   (config.max_position_embeddings, hidden)),
        TensorName("embeddings.token_type_embeddings.weight",
                   "bert/embeddings/token_type_embeddings", (config.type_vocab_size, hidden)),
        *_layer_norm("embeddings.LayerNorm", "bert/embeddings/LayerNorm", hidden)]
    for i in range(config.num_hidden_layers):
        hf, original = f"encoder.layer.{i}", f"bert/encoder/layer_{i}"
        for part in ("query", "key", "value"):
            names += _linear(f"{hf}.attention.self.{part}", f"{original}/attention/self/{part}",
                             hidden, hidden)
        names += _linear(f"{hf}.attention.output.dense", f"{original}/attention/output/dense",
                         hidden, hidden)
        names += _layer_norm(f"{hf}.attention.output.LayerNorm",
                             f"{original}/attention/output/LayerNorm", hidden)
        names += _linear(f"{hf}.intermediate.dense", f"{original}/intermediate/dense",
                         hidden, inner)
        names += _linear(f"{hf}.output.dense", f"{original}/output/dense", inner, hidden)
        names += _layer_norm(f"{hf}.output.LayerNorm", f"{original}/output/LayerNorm", hidden)
    if architecture in _POOLED if pooler is None else pooler:  # the default: transformers' own
        names += _linear("pooler.dense", "bert/pooler/dense", hidden, hidden)
    if architecture != "BertModel":
        names = [dataclasses.replace(name, hf=f"bert.{name.hf}") for name in names]

    if architecture in ("BertForPreTraining", "BertForMaskedLM"):
        names += _linear("cls.predictions.transform.dense", "cls/predictions/transform/dense",
                         hidden, hidden)
        names += _layer_norm("cls.predictions.transform.LayerNorm",
                             "cls/predictions/transform/LayerNorm", hidden)
        # The output projection is the word-embedding table itself, in both.
        names.append(TensorName("cls.predictions.bias", "cls/predictions/output_bias",
                                (config.vocab_size,)))
    if architecture in ("BertForPreTraining", "BertForNextSentencePrediction"):
        names += _output_layer("cls.seq_relationship", "cls/seq_relationship/", 2, hidden)
    if architecture == "BertForQuestionAnswering":
        # Both put the start logit first: logits[..., 0] is the start, [..., 1] the end.
        names += _output_layer("qa_outputs", "cls/squad/", 2, hidden)
    if architecture in ("BertForSequenceClassification", "BertForTokenClassification"):
        names += _output_layer("classifier", "", num_labels, hidden)
    if architecture == "BertForMultipleChoice":
        names += _output_layer("classifier", "", 1, hidden)
    return names


def _architecture(masked_lm, next_sentence, span, root, declared, source):
    """The Hugging Face class whose heads are those present.

    Args:
      masked_lm, next_sentence, span, root: bools, which heads the weights hold.
      declared: the class a config or flag names, or None: it picks among _ROOT_HEADS.
      source: the file, for error messages.
    """
    heads = (masked_lm, next_sentence, span, root)
    by_heads = {(False, False, False, False): "BertModel",
                (True, True, False, False): "BertForPreTraining",
                (True, False, False, False): "BertForMaskedLM",
                (False, True, False, False): "BertForNextSentencePrediction",
                (False, False, True, False): "BertForQuestionAnswering"}
    if heads == (False, False, False, True):
        return declared if declared in _ROOT_HEADS else _DEFAULT_ROOT_HEAD
    if heads not in by_heads:
        present = [name for name, there in zip(
            ("masked LM", "next sentence", "question answering", "classifier"), heads) if there]
        raise ValueError(f"{source}: heads of more than one model ({', '.join(present)}); "
                         f"no BERT class has them together")
    return by_heads[heads]


def _match(names, tensors, key, source, target):
    """Picks each expected tensor by its `key` name ("hf" or "original"), strictly.

    Args:
      names: the `TensorName`s expected.
      tensors: dict name -> np.ndarray, what the input holds (no more, no less).
      key: "hf" (tensors are Hugging Face's) or "original".
      source: the input file, for error messages.
      target: what the names describe, for error messages.

    Returns:
      dict of TensorName -> np.ndarray as the input stores it.

    Raises:
      ValueError, one line: every expected name missing, every shape that differs from the
        config's, and every input tensor left unused.
    """
    expected = {getattr(name, key): name for name in names}
    missing = [name for name in expected if name not in tensors]
    mismatched = []
    for name, entry in expected.items():
        shape = entry.hf_shape if key == "hf" else entry.shape
        if name in tensors and tuple(tensors[name].shape) != shape:
            mismatched.append(f"{name} {tuple(tensors[name].shape)} vs {shape} of the config")
    unused = sorted(set(tensors) - set(expected))
    if missing or mismatched or unused:
        problems = [f"missing {', '.join(missing)}" if missing else "",
                    f"shapes differ: {'; '.join(mismatched)}" if mismatched else "",
                    f"unused tensors: {', '.join(unused)}" if unused else ""]
        raise ValueError(f"{source} does not fit {target}: "
                         + "; ".join(problem for problem in problems if problem))
    return {entry: tensors[name] for name, entry in expected.items()}


# Reading a Hugging Face folder.

def read_json(path):
    """Parses a JSON object file; errors name the file."""
    if not os.path.isfile(path):
        raise ValueError(f"{path}: not found")
    return read_json_object(path)


def _read_safetensors(path):
    try:
        with safe_open(path, framework="np") as reader:
            return {name: reader.get_tensor(name) for name in reader.keys()}
    except SafetensorError as error:
        raise ValueError(f"{path}: not a readable safetensors file ({error})") from None


def _read_pytorch(path):
    try:
        import torch
    except ImportError:
        raise ValueError(f"{path}: reading pytorch_model.bin needs PyTorch, which is not "
                         f"installed (pip install torch), or a model.safetensors") from None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # torch raises many kinds (pickle, zip, runtime) for one cause
        raise ValueError(f"{path}: not a readable PyTorch state dict ({error})") from None
    if not isinstance(state, dict):
        raise ValueError(f"{path}: holds a {type(state).__name__}, not a state dict")
    # NumPy has no bfloat16 of torch's: floats come out as float32, the original's dtype.
    return {name: (value.float() if value.is_floating_point() else value).numpy()
            for name, value in state.items()}


def read_weights(hf_dir):
    """Every tensor of a Hugging Face folder's weights.

    Looks for model.safetensors, then a sharded model.safetensors.index.json, then
    pytorch_model.bin (with PyTorch) and its sharded index.

    Returns:
      (dict name -> np.ndarray, the path read).

    Raises:
      ValueError: no weight file; a shard missing or a name in two shards; PyTorch needed
        but not installed.
    """
    for filename in _WEIGHT_FILES:
        path = os.path.join(hf_dir, filename)
        if not os.path.isfile(path):
            continue
        read = _read_safetensors if ".safetensors" in filename else _read_pytorch
        if not filename.endswith(".index.json"):
            return read(path), path
        weight_map = read_json(path).get("weight_map")
        if not isinstance(weight_map, dict):
            raise ValueError(f"{path}: no weight_map")
        tensors = {}
        for shard in dict.fromkeys(weight_map.values()):
            shard_path = os.path.join(hf_dir, shard)
            if not os.path.isfile(shard_path):
                raise ValueError(f"{shard_path}: not found (named by {path})")
            for name, value in read(shard_path).items():
                if name in tensors:
                    raise ValueError(f"{shard_path}: {name} is in another shard too")
                tensors[name] = value
        return tensors, path
    raise ValueError(f"{hf_dir}: no weights ({', '.join(_WEIGHT_FILES)}) in the folder")


def read_vocab(hf_dir):
    """The folder's vocabulary as the bytes of a vocab.txt.

    vocab.txt itself when there is one, else the WordPiece vocabulary of tokenizer.json, one
    token a line in id order.
    """
    path = os.path.join(hf_dir, "vocab.txt")
    if os.path.isfile(path):
        with open(path, "rb") as reader:
            return reader.read()
    tokenizer_path = os.path.join(hf_dir, "tokenizer.json")
    if not os.path.isfile(tokenizer_path):
        raise ValueError(f"{path}: not found (nor a tokenizer.json to take the vocabulary from)")
    model = read_json(tokenizer_path).get("model") or {}
    vocab = model.get("vocab")
    if model.get("type") != "WordPiece" or not isinstance(vocab, dict):
        raise ValueError(f"{tokenizer_path}: not a WordPiece tokenizer "
                         f"(model type {model.get('type')!r}), and there is no vocab.txt")
    tokens = sorted(vocab, key=vocab.get)
    if [vocab[token] for token in tokens] != list(range(len(tokens))):
        raise ValueError(f"{tokenizer_path}: the vocabulary's ids are not 0..{len(tokens) - 1}")
    return ("\n".join(tokens) + "\n").encode("utf-8")


def _canonical_hf(tensors, source):
    """Hugging Face's tensors under the names `tensor_names` gives `BertModel`.

    Drops the `bert.` prefix; reads the old `LayerNorm.gamma`/`beta` as `weight`/`bias`; checks
    that a stored masked-LM decoder is the tied copy the original implies.

    Returns:
      (dict name -> np.ndarray, list of the input names skipped).

    Raises:
      ValueError: two names for one weight, or an untied decoder.
    """
    renamed, skipped = {}, []
    for name, value in tensors.items():
        short = name.removeprefix("bert.")
        if short.endswith(("LayerNorm.gamma", "LayerNorm.beta")):
            short = short.replace(".gamma", ".weight").replace(".beta", ".bias")
        if short == _POSITION_IDS:
            skipped.append(name)
            continue
        if short in renamed:
            raise ValueError(f"{source}: {name} and another tensor are both {short}")
        renamed[short] = value
    decoder = renamed.pop("cls.predictions.decoder.weight", None)
    if decoder is not None:
        if not np.array_equal(decoder, renamed.get("embeddings.word_embeddings.weight")):
            raise ValueError(f"{source}: cls.predictions.decoder.weight differs from the word "
                             f"embeddings; the original ties them, so it cannot hold this model")
        skipped.append("cls.predictions.decoder.weight")
    decoder_bias = renamed.pop("cls.predictions.decoder.bias", None)
    if decoder_bias is not None:
        if "cls.predictions.bias" not in renamed:
            renamed["cls.predictions.bias"] = decoder_bias
        elif not np.array_equal(decoder_bias, renamed["cls.predictions.bias"]):
            raise ValueError(f"{source}: cls.predictions.decoder.bias differs from "
                             f"cls.predictions.bias; the original has one output bias")
        else:
            skipped.append("cls.predictions.decoder.bias")
    return renamed, skipped


# The two directions.

def _check_not_into(output_dir, input_paths, flag):
    """Refuses an output folder that holds an input: inputs are never overwritten."""
    output_dir = os.path.realpath(output_dir or ".")
    for path in input_paths:
        if os.path.realpath(os.path.dirname(path) or ".") == output_dir:
            raise ValueError(f"--{flag}={output_dir} is the folder of the input {path}; write "
                             f"the conversion to another folder (inputs are never overwritten)")


def _write_file_atomically(path, data):
    with files.atomic_write(path, "wb") as writer:
        writer.write(data)


def hf_to_original(hf_dir, ckpt_path, gelu="exact"):
    """Converts a Hugging Face BERT folder into an original checkpoint, `bert_config.json` and
    `vocab.txt` beside it, each written atomically.

    The model's class comes from the heads its weights hold (bert-base-uncased's folder says
    BertForMaskedLM but holds the next-sentence head too); config.json's `architectures` only
    picks among the heads stored at the root. The class, and a classifier's `id2label`, are
    kept in bert_config.json for the way back.

    Args:
      hf_dir: the folder (config.json, weights, vocab.txt or tokenizer.json).
      ckpt_path: the checkpoint prefix to write, e.g. `out/bert_model.ckpt`.
      gelu: how to write Hugging Face's exact "gelu" (huggingface_config.GELU_CHOICES).

    Returns:
      A `Conversion`, names in the original's naming.

    Raises:
      ValueError: a file missing or unreadable, a model that is not BERT, a tensor missing,
        of another shape, or left over; the output folder is the input's.
    """
    hf_dir = os.fspath(hf_dir)
    config_path = os.path.join(hf_dir, "config.json")
    if not os.path.isfile(config_path):
        raise ValueError(f"{config_path}: not found; a Hugging Face folder has config.json "
                         f"beside its weights")
    if os.path.isdir(ckpt_path):
        raise ValueError(f"--output={ckpt_path} is a folder; give a checkpoint prefix, such as "
                         f"{os.path.join(ckpt_path, 'bert_model.ckpt')}")
    output_dir = os.path.dirname(ckpt_path) or "."
    _check_not_into(output_dir, [config_path], "output")
    raw_config = read_json(config_path)
    config = huggingface_config.from_hf(raw_config, gelu, config_path)
    tensors, source = read_weights(hf_dir)
    tensors, skipped = _canonical_hf(tensors, source)
    declared = (raw_config.get("architectures") or [None])[0]
    architecture = _architecture(
        "cls.predictions.bias" in tensors, "cls.seq_relationship.weight" in tensors,
        "qa_outputs.weight" in tensors, "classifier.weight" in tensors, declared, source)
    num_labels = tensors["classifier.weight"].shape[0] if "classifier.weight" in tensors else None
    names = tensor_names(config, architecture, num_labels,
                         pooler=architecture in _READ_POOLER or "pooler.dense.weight" in tensors)
    names = [dataclasses.replace(name, hf=name.hf.removeprefix("bert.")) for name in names]
    matched = _match(names, tensors, "hf", source, f"{architecture} of {config_path}")

    originals = {}
    for name, value in sorted(matched.items(), key=lambda item: item[0].original):
        if value.dtype.kind in "biu":  # (bfloat16 is no NumPy float kind: test for ints)
            raise ValueError(f"{source}: {name.hf} is {value.dtype}, not a float weight")
        # Floats of any width become float32, the original's dtype.
        value = value.astype(np.float32)
        originals[name.original] = np.ascontiguousarray(value.T) if name.transpose else value
    extra = {"architectures": [architecture]}
    if architecture in huggingface_config.LABELED and "id2label" in raw_config:
        extra["id2label"] = raw_config["id2label"]
    config = BertConfig.from_dict(dict(config.to_dict(), **extra))
    vocab = read_vocab(hf_dir)
    vocab_size = len(vocab.rstrip(b"\n").split(b"\n"))
    if vocab_size != config.vocab_size:
        logging.warning("%s has %d tokens but vocab_size is %d: the scripts will refuse the pair",
                        hf_dir, vocab_size, config.vocab_size)

    name_based.write_tensors(originals, ckpt_path)
    _write_file_atomically(os.path.join(output_dir, "bert_config.json"),
                           config.to_json_string().encode("utf-8"))
    _write_file_atomically(os.path.join(output_dir, "vocab.txt"), vocab)
    return Conversion(architecture, list(originals), skipped)


def original_to_hf(ckpt_path, hf_dir, config, vocab_file, architecture=None,
                   do_lower_case=True):
    """Converts an original checkpoint into a Hugging Face folder that transformers loads into
    the matching class: model.safetensors, config.json, vocab.txt and tokenizer_config.json,
    each written atomically (config.json last: without it the folder is no model).

    The class follows from the checkpoint's heads: `cls/predictions` and `cls/seq_relationship`
    make BertForPreTraining, either alone BertForMaskedLM or BertForNextSentencePrediction,
    `cls/squad` BertForQuestionAnswering, none BertModel. Root `output_weights` are
    run_classifier's, run_ner's or run_multiple_choice's head: `architecture`, else the
    `architectures` key of the config (a converted model's), else
    BertForSequenceClassification. Optimizer state is skipped, and the pooler of a checkpoint
    going to a class without one (masked LM, token classification, question answering).

    Args:
      ckpt_path: checkpoint prefix or its directory.
      hf_dir: the folder to write.
      config: the checkpoint's `BertConfig`.
      vocab_file: its vocab.txt, copied as it is.
      architecture: optional class name, one of huggingface_config.ARCHITECTURES; must fit the heads.
      do_lower_case: written to tokenizer_config.json for transformers' tokenizer.

    Returns:
      A `Conversion`, names in Hugging Face's naming.

    Raises:
      ValueError: `architecture` does not fit the heads, a tensor missing, of another shape,
        or left over, or the output folder is an input's.
    """
    if architecture is not None and architecture not in huggingface_config.ARCHITECTURES:
        raise ValueError(f"architecture {architecture!r} is not one of "
                         f"{huggingface_config.ARCHITECTURES}")
    if not tf.io.gfile.exists(vocab_file):
        raise ValueError(f"{vocab_file}: not found")
    ckpt_path = name_based.resolve_checkpoint(ckpt_path)
    _check_not_into(hf_dir, [ckpt_path, vocab_file], "output")
    reader = name_based.open_checkpoint(ckpt_path)
    names = sorted(reader.shapes)
    skipped = [name for name in names if name_based.is_optimizer_state(name)]
    present = {name for name in names if name not in skipped}
    declared = architecture or (config.extra.get("architectures") or [None])[0]
    found = _architecture(
        "cls/predictions/output_bias" in present, "cls/seq_relationship/output_weights" in present,
        "cls/squad/output_weights" in present, "output_weights" in present, declared, ckpt_path)
    if architecture is not None and found != architecture:
        raise ValueError(f"{ckpt_path} holds the weights of {found}, not of {architecture}")
    if found not in _POOLED:
        skipped += sorted(present.intersection(POOLER))
        present -= set(POOLER)
    num_labels = (reader.shapes["output_weights"][0]
                  if "output_weights" in present else None)
    expected = tensor_names(config, found, num_labels,
                            pooler=found in _READ_POOLER or POOLER[0] in present)
    tensors = {name: reader.get_tensor(name) for name in present}
    reader.verify(skipped)
    matched = _match(expected, tensors, "original", ckpt_path, f"{found} of the config")
    weights = {name.hf: np.ascontiguousarray(value.T) if name.transpose else value
               for name, value in matched.items()}

    tf.io.gfile.makedirs(hf_dir)
    # transformers loads only files whose metadata names a framework it knows.
    _write_file_atomically(os.path.join(hf_dir, "model.safetensors"), safetensors_bytes(
        dict(sorted(weights.items())), metadata={"format": "pt"}))
    with tf.io.gfile.GFile(vocab_file, "rb") as vocab_reader:
        _write_file_atomically(os.path.join(hf_dir, "vocab.txt"), vocab_reader.read())
    tokenizer_config = {"do_lower_case": do_lower_case, "tokenizer_class": "BertTokenizer"}
    for filename, content in (("tokenizer_config.json", tokenizer_config),
                              ("config.json", huggingface_config.to_hf(config, found, num_labels))):
        _write_file_atomically(os.path.join(hf_dir, filename),
                               (json.dumps(content, indent=2, sort_keys=True) + "\n").encode())
    return Conversion(found, sorted(weights), skipped)
