"""BertConfig: the hyper-parameters of a BERT model, with the keys of `bert_config.json`."""
import copy
import json

# "gelu" is the original's tanh approximation; "gelu_exact" is x·Φ(x) with the erf, what
# Hugging Face and PyTorch call "gelu" (a converted model keeps its own; see layers.gelu_exact).
ACTIVATIONS = ("gelu", "gelu_exact", "relu", "tanh", "linear")
LAYER_NORM_EPS = 1e-12  # the original's, fixed in its code; Keras defaults to 1e-3

_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
           "intermediate_size", "hidden_act", "hidden_dropout_prob",
           "attention_probs_dropout_prob", "max_position_embeddings", "type_vocab_size",
           "initializer_range")
_POSITIVE_INTS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                  "intermediate_size", "max_position_embeddings", "type_vocab_size")


class BertConfig:
    """Hyper-parameters of `BertModel`, field for field those of the original `modeling.py`.

    Two additions, for models converted from Hugging Face: `hidden_act` may be `gelu_exact`, and
    `layer_norm_eps` (Hugging Face's key) sets the LayerNorm epsilon the original fixes at 1e-12;
    `to_dict` writes it only when it differs, so Google's configs round trip unchanged. The
    original code refuses `gelu_exact` and ignores `layer_norm_eps`.

    One addition for the paper's left-to-right ablation (its "LTR & No NSP" model):
    `causal_attention: true` lets each position attend only to itself and the positions
    before it, and has the pooler read the last real token, the only one that has seen the
    whole input. It is written only when true; the original code would ignore it.

    Keys that the original does not know (Google's own configs carry `directionality` and
    `pooler_*`) are kept in `extra` and written back by `to_dict`, but change nothing.
    """

    def __init__(self, vocab_size, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                 intermediate_size=3072, hidden_act="gelu", hidden_dropout_prob=0.1,
                 attention_probs_dropout_prob=0.1, max_position_embeddings=512,
                 type_vocab_size=16, initializer_range=0.02, layer_norm_eps=LAYER_NORM_EPS,
                 causal_attention=False, **extra):
        """Stores and validates the fields.

        Raises:
          ValueError: a size is not a positive integer, `hidden_size` is not a multiple of
            `num_attention_heads`, `hidden_act` is unknown, a probability is outside [0, 1), or
            `initializer_range` or `layer_norm_eps` is not positive.
        """
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps
        self.causal_attention = causal_attention
        self.extra = dict(extra)
        self._validate()

    def _validate(self):
        for field in _POSITIVE_INTS:
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"BertConfig.{field} must be a positive integer, got {value!r}")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"BertConfig.hidden_size ({self.hidden_size}) is not a multiple of "
                f"num_attention_heads ({self.num_attention_heads})")
        if self.hidden_act not in ACTIVATIONS:
            raise ValueError(f"BertConfig.hidden_act must be one of {ACTIVATIONS}, "
                             f"got {self.hidden_act!r}")
        for field in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, field)
            if not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
                raise ValueError(f"BertConfig.{field} must be in [0, 1), got {value!r}")
        if not isinstance(self.causal_attention, bool):
            raise ValueError(f"BertConfig.causal_attention must be true or false, "
                             f"got {self.causal_attention!r}")
        for field in ("initializer_range", "layer_norm_eps"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"BertConfig.{field} must be positive, got {value!r}")

    @property
    def size_per_head(self):
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def from_dict(cls, json_object):
        """Builds a config from a dict with the keys of `bert_config.json`."""
        if "vocab_size" not in json_object:
            raise ValueError(f"BertConfig needs vocab_size; got keys {sorted(json_object)}")
        return cls(**json_object)

    @classmethod
    def coerce(cls, config):
        """`config` itself, or the config of its dict: what a model's constructor gets, from code
        or from Keras' deserialization of its `get_config`."""
        return config if isinstance(config, cls) else cls.from_dict(config)

    @classmethod
    def from_json_file(cls, json_file):
        """Reads `bert_config.json`; errors name the file."""
        data = read_json_object(json_file)
        try:
            return cls.from_dict(data)
        except (ValueError, TypeError) as error:
            raise ValueError(f"{json_file}: {error}") from None

    def to_dict(self):
        output = {field: getattr(self, field) for field in _FIELDS}
        if self.layer_norm_eps != LAYER_NORM_EPS:
            output["layer_norm_eps"] = self.layer_norm_eps
        if self.causal_attention:
            output["causal_attention"] = True
        output.update(copy.deepcopy(self.extra))
        return output

    def to_json_string(self):
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def __eq__(self, other):
        return isinstance(other, BertConfig) and self.to_dict() == other.to_dict()

    def __repr__(self):
        return f"BertConfig({self.to_dict()})"


def read_json_object(path):
    """Parses a file holding one JSON object; errors name the file.

    Raises:
      ValueError: if the file is not valid JSON or holds something else than an object.
      OSError: if it cannot be read.
    """
    try:
        with open(path, encoding="utf-8-sig") as reader:
            data = json.load(reader)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not valid JSON ({error})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data
