"""keras-hub BERT presets to original checkpoints, and back, through keras-hub's own classes.

A preset is a folder that keras-hub's `from_preset` reads: `config.json` and
`model.weights.h5` (the `BertBackbone`), `tokenizer.json` with `assets/tokenizer/
vocabulary.txt`, `preprocessor.json`, `metadata.json`, and for a task (`BertMaskedLM`,
`BertTextClassifier`) `task.json` and `task.weights.h5`. It is written by building keras-hub's
models, assigning the checkpoint's tensors and calling `save_to_preset`, never file by file.

Every original variable has one keras-hub variable: the same numbers, reshaped where keras-hub
splits the attention heads, and transposed for the classifier's output layer (the original's
`output_weights` are [out, in], keras-hub's Dense kernel [in, out]). keras-hub imports here
only, on first use: it is an optional extra.

keras-hub fixes what the original's config leaves open: the tanh GELU and LayerNorm epsilon
1e-12 in the encoder, and, in `BertMaskedLM`'s head, the exact GELU and epsilon 1e-5. A model
whose numbers keras-hub cannot reproduce is refused, or converted with a warning stating how
far keras-hub's outputs are from this project's, measured on a probe batch.

Shape legend: V vocabulary, P max positions, S token types, H hidden, I intermediate,
N heads, D = H / N, C classes.
"""
import dataclasses
import json
import os

import numpy as np
import tensorflow as tf
from absl import logging

from modeling.checkpoints import name_based
from modeling.encoder.bert_model import POOLER, BertModel
from modeling.encoder.config import LAYER_NORM_EPS, BertConfig
from modeling.heads import MaskedLMHead, gather_positions
from modeling.runtime import files

# keras-hub's BertBackbone computes these, whatever a config says.
KERAS_HUB_ACTIVATION = "gelu"  # the original's tanh approximation
MASKED_LM = "BertMaskedLM"
CLASSIFIER = "BertTextClassifier"
# The probe batch on which keras-hub's outputs are compared with this project's.
_PROBE_BATCH, _PROBE_LENGTH, _PROBE_SEED = 3, 16, 7


def import_keras_hub():
    """keras_hub, or a one-line error saying how to install it."""
    try:
        import keras_hub
    except ImportError:
        raise ValueError('keras-hub presets need the keras-hub extra, which is not installed: '
                         'pip install -e ".[keras-hub]"') from None
    return keras_hub


@dataclasses.dataclass(frozen=True)
class Weight:
    """One tensor under both names.

    Attributes:
      original: the original checkpoint name.
      hub: the keras-hub variable's path within its task (or backbone).
      shape: the original's shape.
      hub_shape: keras-hub's.
      transpose: True for the classifier's output layer, else a reshape alone.
    """
    original: str
    hub: str
    shape: tuple
    hub_shape: tuple
    transpose: bool = False

    def to_hub(self, value):
        return value.T if self.transpose else value.reshape(self.hub_shape)

    def to_original(self, value):
        return np.ascontiguousarray(value.T) if self.transpose else value.reshape(self.shape)


def _same(original, hub, shape):
    return Weight(original, hub, shape, shape)


def _dense(original, hub, inputs, outputs):
    return [_same(f"{original}/kernel", f"{hub}/kernel", (inputs, outputs)),
            _same(f"{original}/bias", f"{hub}/bias", (outputs,))]


def _layer_norm(original, hub, size):
    return [_same(f"{original}/gamma", f"{hub}/gamma", (size,)),
            _same(f"{original}/beta", f"{hub}/beta", (size,))]


def weight_names(config, head=None, num_classes=None, pooler=True):
    """Every weight of keras-hub's BERT (a backbone, or a task's `head`), under both names.

    Args:
      config: a `BertConfig`.
      head: None (the backbone), MASKED_LM or CLASSIFIER.
      num_classes: int C, the classifier's outputs.
      pooler: whether to list the pooler.

    Returns:
      A list of `Weight`.
    """
    hidden, heads = config.hidden_size, config.num_attention_heads
    per_head = hidden // heads
    names = [_same("bert/embeddings/word_embeddings", "token_embedding/embeddings",
                   (config.vocab_size, hidden)),
             _same("bert/embeddings/position_embeddings", "position_embedding/embeddings",
                   (config.max_position_embeddings, hidden)),
             _same("bert/embeddings/token_type_embeddings", "segment_embedding/embeddings",
                   (config.type_vocab_size, hidden)),
             *_layer_norm("bert/embeddings/LayerNorm", "embeddings_layer_norm", hidden)]
    for i in range(config.num_hidden_layers):
        original, hub = f"bert/encoder/layer_{i}", f"transformer_layer_{i}"
        for part in ("query", "key", "value"):
            scope = f"{hub}/self_attention_layer/{part}"
            names += [Weight(f"{original}/attention/self/{part}/kernel", f"{scope}/kernel",
                             (hidden, hidden), (hidden, heads, per_head)),  # [H, N, D]
                      Weight(f"{original}/attention/self/{part}/bias", f"{scope}/bias",
                             (hidden,), (heads, per_head))]  # [N, D]
        scope = f"{hub}/self_attention_layer/attention_output"
        names += [Weight(f"{original}/attention/output/dense/kernel", f"{scope}/kernel",
                         (hidden, hidden), (heads, per_head, hidden)),  # [N, D, H]
                  _same(f"{original}/attention/output/dense/bias", f"{scope}/bias", (hidden,))]
        names += _layer_norm(f"{original}/attention/output/LayerNorm",
                             f"{hub}/self_attention_layer_norm", hidden)
        names += _dense(f"{original}/intermediate/dense", f"{hub}/feedforward_intermediate_dense",
                        hidden, config.intermediate_size)
        names += _dense(f"{original}/output/dense", f"{hub}/feedforward_output_dense",
                        config.intermediate_size, hidden)
        names += _layer_norm(f"{original}/output/LayerNorm", f"{hub}/feedforward_layer_norm",
                             hidden)
    if pooler:
        names += _dense("bert/pooler/dense", "pooled_dense", hidden, hidden)
    if head == MASKED_LM:
        # The output projection is the word-embedding table itself, in both.
        names += _dense("cls/predictions/transform/dense", "mlm_head/intermediate_dense",
                        hidden, hidden)
        names += _layer_norm("cls/predictions/transform/LayerNorm",
                             "mlm_head/intermediate_layer_norm", hidden)
        names.append(_same("cls/predictions/output_bias", "mlm_head/output_bias",
                           (config.vocab_size,)))
    if head == CLASSIFIER:
        names += [Weight("output_weights", "logits/kernel", (num_classes, hidden),
                         (hidden, num_classes), transpose=True),
                  _same("output_bias", "logits/bias", (num_classes,))]
    return names


@dataclasses.dataclass
class Conversion:
    """What a conversion did.

    Attributes:
      kind: what the preset holds: "BertBackbone", MASKED_LM or CLASSIFIER.
      converted: the original names written or read.
      skipped: checkpoint tensors keras-hub's BERT has no place for (optimizer state, the
        next-sentence and SQuAD heads), or preset files not converted.
      difference: dict output name -> max |keras-hub - ours| on the probe batch (to a preset).
      lowercase: whether the preset's tokenizer lower-cases (the scripts' --do_lower_case).
    """
    kind: str
    converted: list
    skipped: list
    difference: dict = dataclasses.field(default_factory=dict)
    lowercase: bool = True


def unrepresentable(config):
    """What of `config` keras-hub's BertBackbone computes otherwise, as "key value" strings."""
    problems = []
    if config.hidden_act != KERAS_HUB_ACTIVATION:
        problems.append(f"hidden_act {config.hidden_act!r} (it computes the tanh 'gelu')")
    if config.layer_norm_eps != LAYER_NORM_EPS:
        problems.append(f"layer_norm_eps {config.layer_norm_eps!r} (it computes "
                        f"{LAYER_NORM_EPS!r})")
    return problems


def _checkpoint_head(present, config, ckpt_path):
    """The keras-hub task of the checkpoint's heads: MASKED_LM, CLASSIFIER or None."""
    architecture = (config.extra.get("architectures") or [None])[0]
    if "output_weights" in present:
        if architecture not in (None, "BertForSequenceClassification"):
            raise ValueError(f"{ckpt_path}: its root output_weights are the head of "
                             f"{architecture}, which keras-hub's BERT has no task for; only "
                             f"run_classifier's head converts (to BertTextClassifier)")
        return CLASSIFIER
    return MASKED_LM if "cls/predictions/output_bias" in present else None


def original_to_preset(ckpt_path, preset_dir, config, vocab_file, do_lower_case=True,
                       sequence_length=None, approximate=False):
    """Writes an original checkpoint as a keras-hub preset folder, atomically.

    The preset is a `BertMaskedLM` task when the checkpoint has the masked-LM head, a
    `BertTextClassifier` when it has run_classifier's `output_weights`, else a `BertBackbone`;
    each with a tokenizer of `vocab_file` and a preprocessor of `sequence_length`.

    Args:
      ckpt_path: checkpoint prefix or its directory.
      preset_dir: the folder to write; must not exist.
      config: the checkpoint's `BertConfig`.
      vocab_file: its vocab.txt.
      do_lower_case: whether the tokenizer lower-cases and strips accents, as the original's.
      sequence_length: the preprocessor's; by default max_position_embeddings.
      approximate: convert a config keras-hub computes otherwise (`unrepresentable`), with a
        warning of the measured difference, instead of refusing it.

    Returns:
      A `Conversion`.

    Raises:
      ValueError: keras-hub not installed, a config keras-hub cannot represent (unless
        `approximate`), a sequence length over the positions, a vocabulary of another size, a
        checkpoint tensor missing or of another shape, or an existing output folder.
    """
    sequence_length = sequence_length or config.max_position_embeddings
    if not 0 < sequence_length <= config.max_position_embeddings:
        raise ValueError(f"--max_seq_length={sequence_length} is not within the model's "
                         f"max_position_embeddings {config.max_position_embeddings}")
    if config.causal_attention:
        raise ValueError("a left-to-right model (causal_attention in its bert_config.json) has "
                         "no keras-hub counterpart: BertBackbone attends both ways")
    problems = unrepresentable(config)
    if problems and not approximate:
        raise ValueError(f"keras-hub's BertBackbone cannot represent {'; '.join(problems)}; "
                         f"pass --keras_hub_approximate to convert it anyway, with a warning "
                         f"of the measured difference")
    if tf.io.gfile.exists(preset_dir):
        raise ValueError(f"--output={preset_dir} exists; a preset is written as a new folder")
    keras_hub = import_keras_hub()
    reader = name_based.open_checkpoint(ckpt_path)
    present = {name for name in reader.shapes if not name_based.is_optimizer_state(name)}
    head = _checkpoint_head(present, config, reader.path)
    has_pooler = POOLER[0] in present
    num_classes = reader.shapes["output_weights"][0] if head == CLASSIFIER else None
    names = weight_names(config, head, num_classes, pooler=has_pooler)

    tokenizer = keras_hub.models.BertTokenizer(vocabulary=vocab_file, lowercase=do_lower_case,
                                               strip_accents=do_lower_case)
    if tokenizer.vocabulary_size() != config.vocab_size:
        raise ValueError(f"{vocab_file} has {tokenizer.vocabulary_size()} tokens but the "
                         f"config's vocab_size is {config.vocab_size}")
    if config.hidden_dropout_prob != config.attention_probs_dropout_prob:
        logging.warning("keras-hub's BertBackbone has one dropout rate; it takes "
                        "hidden_dropout_prob %s (attention_probs_dropout_prob is %s)",
                        config.hidden_dropout_prob, config.attention_probs_dropout_prob)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config.vocab_size, num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads, hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size, dropout=config.hidden_dropout_prob,
        max_sequence_length=config.max_position_embeddings,
        num_segments=config.type_vocab_size)
    if head == MASKED_LM:
        model = keras_hub.models.BertMaskedLM(
            backbone, preprocessor=keras_hub.models.BertMaskedLMPreprocessor(
                tokenizer, sequence_length=sequence_length))
    elif head == CLASSIFIER:
        model = keras_hub.models.BertTextClassifier(
            backbone, num_classes, preprocessor=keras_hub.models.BertTextClassifierPreprocessor(
                tokenizer, sequence_length=sequence_length))
    else:
        model = backbone
    tensors = _read(reader, names)
    _assign(model, names, tensors, reader.path, has_pooler)
    if not has_pooler:
        logging.warning("%s has no pooler (bert/pooler/dense); keras-hub's pooled_dense keeps "
                        "its random initial values", reader.path)
    skipped = sorted(set(reader.shapes) - {name.original for name in names})
    reader.verify(skipped)

    difference = _measure(model, head, config, tensors, has_pooler)
    if problems:
        logging.warning("Converted what keras-hub's BertBackbone cannot represent, %s: on a "
                        "probe batch its outputs differ from this model's by up to %s",
                        "; ".join(problems),
                        describe(difference))
    if head == MASKED_LM:
        logging.warning("keras-hub's BertMaskedLM head computes the exact GELU with LayerNorm "
                        "epsilon 1e-5, where the original's uses the config's activation and "
                        "epsilon: its log-probabilities differ from this model's by up to %.2g",
                        difference["masked_lm_log_probs"])
    with files.atomic_path(preset_dir) as temp:
        model.save_to_preset(temp)
        if head is None:  # a task saves its own; a backbone's comes apart
            keras_hub.models.BertTextClassifierPreprocessor(
                tokenizer, sequence_length=sequence_length).save_to_preset(temp)
    kind = head or "BertBackbone"
    return Conversion(kind, sorted(tensors), skipped, difference, do_lower_case)


def _read(reader, names):
    """The checkpoint's tensors for `names`, strictly: each there with its shape."""
    missing = [name.original for name in names if name.original not in reader.shapes]
    mismatched = [f"{name.original} {tuple(reader.shapes[name.original])} vs {name.shape} of "
                  f"the config" for name in names if name.original in reader.shapes
                  and tuple(reader.shapes[name.original]) != name.shape]
    if missing or mismatched:
        problems = ([f"missing {', '.join(missing)}"] if missing else []) + mismatched
        raise ValueError(f"{reader.path} does not fit the config: " + "; ".join(problems))
    return {name.original: reader.get_tensor(name.original) for name in names}


def _assign(model, names, tensors, source, has_pooler):
    """Copies each tensor into its keras-hub variable; every variable of `model` is assigned
    once, but the pooler's when the checkpoint has none."""
    variables = {variable.path: variable for variable in model.weights}
    unassigned = {"pooled_dense/kernel", "pooled_dense/bias"} if not has_pooler else set()
    expected = {name.hub for name in names} | unassigned
    if expected != set(variables):
        raise ValueError(f"{source}: keras-hub's {model.name} does not have the variables "
                         f"BERT's mapping expects: {sorted(expected ^ set(variables))} (another "
                         f"keras-hub version?)")
    for name in names:
        variables[name.hub].assign(name.to_hub(tensors[name.original]))


def _probe_inputs(config):
    """A fixed batch of ids with padding: rows of 16, 11 and 5 real tokens."""
    length = min(_PROBE_LENGTH, config.max_position_embeddings)
    rng = np.random.RandomState(_PROBE_SEED)
    ids = rng.randint(0, config.vocab_size, (_PROBE_BATCH, length)).astype(np.int32)
    real = np.array([length, max(1, length * 2 // 3), max(1, length // 3)])
    mask = (np.arange(length)[None, :] < real[:, None]).astype(np.int32)  # [B, T]
    segments = rng.randint(0, config.type_vocab_size, (_PROBE_BATCH, length)).astype(np.int32)
    positions = np.stack([rng.randint(0, n, 4) for n in real]).astype(np.int32)  # [B, 4]
    return ids * mask, mask, segments * mask, positions


def _measure(model, head, config, tensors, has_pooler):
    """Max |keras-hub - ours| at the real tokens of the probe batch, per output."""
    ids, mask, segments, positions = _probe_inputs(config)
    ours = BertModel(config)
    for variable in ours.weights:
        name = name_based.checkpoint_name(variable)
        if name in tensors:
            variable.assign(tensors[name])
    outputs = ours({"input_ids": ids, "input_mask": mask, "token_type_ids": segments})
    backbone = model if head is None else model.backbone
    theirs = backbone({"token_ids": ids, "segment_ids": segments, "padding_mask": mask})
    real = mask.astype(bool)
    difference = {"sequence_output": float(np.max(np.abs(
        theirs["sequence_output"].numpy()[real] - outputs["sequence_output"].numpy()[real])))}
    if has_pooler:
        difference["pooled_output"] = float(np.max(np.abs(
            theirs["pooled_output"].numpy() - outputs["pooled_output"].numpy())))
    if head == MASKED_LM:
        ours_head = MaskedLMHead(config, ours.get_embedding_table())
        for variable in ours_head.weights:
            variable.assign(tensors[name_based.checkpoint_name(variable)])
        log_probs = ours_head(gather_positions(outputs["sequence_output"], positions))
        logits = model({"token_ids": ids, "segment_ids": segments, "padding_mask": mask,
                        "mask_positions": positions})
        difference["masked_lm_log_probs"] = float(np.max(np.abs(
            tf.nn.log_softmax(logits).numpy() - log_probs.numpy())))
    if head == CLASSIFIER:
        logits = model({"token_ids": ids, "segment_ids": segments, "padding_mask": mask})
        ours_logits = tf.matmul(outputs["pooled_output"], tensors["output_weights"],
                                transpose_b=True) + tensors["output_bias"]
        difference["logits"] = float(np.max(np.abs(logits.numpy() - ours_logits.numpy())))
    return difference


def describe(difference):
    return ", ".join(f"{value:.2g} ({name})" for name, value in difference.items())


# A preset back to an original checkpoint.

def _preset_class(preset_dir, filename):
    """The `class_name` of a preset's config file, or None when the file is not there."""
    path = os.path.join(preset_dir, filename)
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as reader:
            content = json.load(reader)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: not a keras-hub config file ({error})") from None
    name = content.get("class_name") if isinstance(content, dict) else None
    if not isinstance(name, str):
        raise ValueError(f"{path}: not a keras-hub config file (no class_name)")
    return name


def is_preset(path):
    """A folder whose config.json is a keras-hub backbone's (it names a `class_name`)."""
    config_path = os.path.join(path, "config.json")
    if not (os.path.isdir(path) and os.path.isfile(config_path)):
        return False
    try:
        with open(config_path, encoding="utf-8") as reader:
            content = json.load(reader)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(content, dict) and "class_name" in content and "module" in content


def preset_to_original(preset_dir, ckpt_path):
    """Writes a keras-hub BERT preset (a backbone, a `BertTextClassifier` or a `BertMaskedLM`)
    as an original checkpoint with `bert_config.json` and `vocab.txt` beside it, each atomically.

    Returns:
      A `Conversion`; `lowercase` says the --do_lower_case the scripts need.

    Raises:
      ValueError: keras-hub not installed, a preset of another model or task, a tokenizer the
        original cannot express, or a checkpoint prefix that is a folder.
    """
    backbone_class = _preset_class(preset_dir, "config.json")
    if backbone_class != "BertBackbone":
        raise ValueError(f"{os.path.join(preset_dir, 'config.json')}: a {backbone_class} "
                         f"preset; only keras-hub's BertBackbone converts")
    if os.path.isdir(ckpt_path):
        raise ValueError(f"--output={ckpt_path} is a folder; give a checkpoint prefix, such as "
                         f"{os.path.join(ckpt_path, 'bert_model.ckpt')}")
    output_dir = os.path.dirname(ckpt_path) or "."
    if os.path.realpath(output_dir) == os.path.realpath(preset_dir):
        raise ValueError(f"--output={ckpt_path} is in the preset folder {preset_dir}; write the "
                         f"conversion to another folder (inputs are never overwritten)")
    keras_hub = import_keras_hub()
    task_class = _preset_class(preset_dir, "task.json")
    tasks = {CLASSIFIER: keras_hub.models.TextClassifier, MASKED_LM: keras_hub.models.MaskedLM,
             None: keras_hub.models.Backbone}
    if task_class not in tasks:
        raise ValueError(f"{os.path.join(preset_dir, 'task.json')}: a {task_class} task; "
                         f"only {CLASSIFIER} and {MASKED_LM} convert (or the backbone alone, "
                         f"without task.json)")
    model = tasks[task_class].from_preset(preset_dir)
    backbone = model if task_class is None else model.backbone
    config = BertConfig(
        vocab_size=backbone.vocabulary_size, hidden_size=backbone.hidden_dim,
        num_hidden_layers=backbone.num_layers, num_attention_heads=backbone.num_heads,
        intermediate_size=backbone.intermediate_dim, hidden_act=KERAS_HUB_ACTIVATION,
        hidden_dropout_prob=backbone.dropout, attention_probs_dropout_prob=backbone.dropout,
        max_position_embeddings=backbone.max_sequence_length,
        type_vocab_size=backbone.num_segments)
    num_classes = model.num_classes if task_class == CLASSIFIER else None
    names = weight_names(config, task_class, num_classes)
    variables = {variable.path: variable for variable in model.weights}
    if set(variables) != {name.hub for name in names}:
        raise ValueError(f"{preset_dir}: keras-hub's {model.name} has other variables than "
                         f"BERT's: {sorted(set(variables) ^ {name.hub for name in names})}")
    originals = {name.original: name.to_original(variables[name.hub].numpy())
                 for name in sorted(names, key=lambda name: name.original)}
    vocab, lowercase = _tokenizer_vocab(model, backbone, keras_hub, preset_dir)

    name_based.write_tensors(originals, ckpt_path)
    with files.atomic_write(os.path.join(output_dir, "bert_config.json")) as writer:
        writer.write(config.to_json_string())
    with files.atomic_write(os.path.join(output_dir, "vocab.txt")) as writer:
        writer.write("".join(token + "\n" for token in vocab))
    return Conversion(task_class or "BertBackbone", list(originals), [], lowercase=lowercase)


def _tokenizer_vocab(model, backbone, keras_hub, preset_dir):
    """The preset's vocabulary, in id order, and whether its tokenizer lower-cases."""
    preprocessor = getattr(model, "preprocessor", None)
    tokenizer = (preprocessor.tokenizer if preprocessor is not None
                 else keras_hub.models.BertTokenizer.from_preset(preset_dir))
    if tokenizer.lowercase != tokenizer.strip_accents:
        raise ValueError(f"{preset_dir}: its tokenizer has lowercase={tokenizer.lowercase} but "
                         f"strip_accents={tokenizer.strip_accents}; the original's "
                         f"--do_lower_case does both or neither")
    vocab = tokenizer.get_vocabulary()
    if len(vocab) != backbone.vocabulary_size:
        raise ValueError(f"{preset_dir}: its tokenizer has {len(vocab)} tokens but the "
                         f"backbone's vocabulary_size is {backbone.vocabulary_size}")
    return vocab, tokenizer.lowercase
