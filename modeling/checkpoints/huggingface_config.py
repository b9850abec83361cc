"""Hugging Face's `config.json` for BERT, to `BertConfig` and back.

The hyper-parameters share their names. What differs is the activation's name: Hugging Face's
`"gelu"` is the exact erf form, which the original calls nothing (we call it `"gelu_exact"`),
while the original's `"gelu"` (the tanh approximation) is Hugging Face's `"gelu_new"`.
"""
from modeling.encoder.config import BertConfig

# The classes of transformers' BERT this project converts, and what their weights hold.
ARCHITECTURES = ("BertModel", "BertForPreTraining", "BertForMaskedLM",
                 "BertForNextSentencePrediction", "BertForSequenceClassification",
                 "BertForTokenClassification", "BertForMultipleChoice",
                 "BertForQuestionAnswering")
# Heads whose labels are named by `id2label` in config.json.
LABELED = ("BertForSequenceClassification", "BertForTokenClassification")

# transformers' BertConfig defaults, which a config.json may leave out.
_HF_DEFAULTS = {"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12,
                "num_attention_heads": 12, "intermediate_size": 3072, "hidden_act": "gelu",
                "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
                "max_position_embeddings": 512, "type_vocab_size": 2,
                "initializer_range": 0.02, "layer_norm_eps": 1e-12}

# Hugging Face activation -> ours. "gelu_new", "gelu_pytorch_tanh" and "gelu_fast" are three
# spellings of the original's tanh approximation.
_ACTIVATION_FROM_HF = {"gelu": "gelu_exact", "gelu_new": "gelu", "gelu_pytorch_tanh": "gelu",
                       "gelu_fast": "gelu", "relu": "relu", "tanh": "tanh", "linear": "linear"}
_ACTIVATION_TO_HF = {"gelu_exact": "gelu", "gelu": "gelu_new", "relu": "relu", "tanh": "tanh",
                     "linear": "linear"}

# How to write Hugging Face's exact "gelu": as itself (the model's own numbers), or as the
# original's tanh approximation (a config the original code runs, with slightly other numbers).
GELU_CHOICES = ("exact", "approximate")


def from_hf(hf_config, gelu="exact", source="config.json"):
    """Builds the `BertConfig` of a Hugging Face BERT config.

    Args:
      hf_config: dict, the parsed config.json.
      gelu: "exact" writes Hugging Face's "gelu" as "gelu_exact"; "approximate" as the
        original's "gelu" (tanh), for the original code, at a cost in fidelity.
      source: the file, for error messages.

    Returns:
      A `BertConfig`; `layer_norm_eps` set from the file.

    Raises:
      ValueError: the model is not BERT (`model_type`), is a decoder or has cross-attention,
        uses relative position embeddings, or an activation we do not have; names the value.
    """
    if gelu not in GELU_CHOICES:
        raise ValueError(f"gelu must be one of {GELU_CHOICES}, got {gelu!r}")
    model_type = hf_config.get("model_type")
    if model_type != "bert":
        raise ValueError(f"{source}: model_type {model_type!r} is not BERT; only "
                         f"model_type 'bert' converts (architectures: "
                         f"{hf_config.get('architectures')})")
    position_type = hf_config.get("position_embedding_type", "absolute")
    if position_type != "absolute":
        raise ValueError(f"{source}: position_embedding_type {position_type!r} is not the "
                         f"original's learned absolute positions; only 'absolute' converts")
    for key in ("is_decoder", "add_cross_attention"):
        if hf_config.get(key):
            raise ValueError(f"{source}: {key} is true; the original BERT is an encoder only")
    fields = {key: hf_config.get(key, default) for key, default in _HF_DEFAULTS.items()}
    activation = fields["hidden_act"]
    if activation not in _ACTIVATION_FROM_HF:
        raise ValueError(f"{source}: hidden_act {activation!r} has no counterpart here; known: "
                         f"{sorted(_ACTIVATION_FROM_HF)}")
    fields["hidden_act"] = ("gelu" if activation == "gelu" and gelu == "approximate"
                            else _ACTIVATION_FROM_HF[activation])
    try:
        return BertConfig(**fields)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{source}: {error}") from None


def to_hf(config, architecture, num_labels=None):
    """The config.json of a Hugging Face folder holding `config` as `architecture`.

    Args:
      config: a `BertConfig`. Its `id2label` extra key (kept from a Hugging Face model) names
        the labels of a labeled head when the count fits; otherwise they are LABEL_0, ...
      architecture: one of ARCHITECTURES.
      num_labels: int, the outputs of a LABELED head.

    Returns:
      A dict with `architectures`, `model_type` and the hyper-parameters, `hidden_act` in
      Hugging Face's spelling; `id2label` and `label2id` for a LABELED head.
    """
    if config.causal_attention:
        raise ValueError("a left-to-right model (causal_attention in its bert_config.json) has "
                         "no Hugging Face BERT counterpart: BertModel attends both ways")
    hf_config = {"architectures": [architecture], "model_type": "bert"}
    hf_config.update({key: getattr(config, key) for key in _HF_DEFAULTS})
    hf_config["hidden_act"] = _ACTIVATION_TO_HF[config.hidden_act]
    if architecture in LABELED:
        names = config.extra.get("id2label") or {}
        if set(names) != {str(i) for i in range(num_labels)}:
            names = {str(i): f"LABEL_{i}" for i in range(num_labels)}
        hf_config["id2label"] = {str(i): names[str(i)] for i in range(num_labels)}
        hf_config["label2id"] = {names[str(i)]: i for i in range(num_labels)}
    return hf_config
