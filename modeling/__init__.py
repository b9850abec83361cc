"""BERT as the original release defines it, on TensorFlow 2 / Keras 3.

`BertConfig`, `BertModel`, `BertPretrainer`, `GraphTokenizer` and the `checkpoint` module are
loaded on first use,
so that `from modeling import tokenization` (data pipelines, worker processes) never imports
TensorFlow.
"""
import importlib

_LAZY = {
    "BertConfig": ("modeling.config", "BertConfig"),
    "BertModel": ("modeling.bert_model", "BertModel"),
    "BertPretrainer": ("modeling.heads", "BertPretrainer"),
    "checkpoint": ("modeling.checkpoint", None),
    "GraphTokenizer": ("modeling.graph_tokenizer", "GraphTokenizer"),
}
__all__ = list(_LAZY)


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(f"module 'modeling' has no attribute {name!r}")
    module_name, attribute = _LAZY[name]
    module = importlib.import_module(module_name)
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value
    return value
