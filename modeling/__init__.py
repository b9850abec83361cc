"""BERT as the original release defines it, on TensorFlow 2 / Keras 3.

The rooms, from the bottom floor (docs/layout.md draws them): `runtime` (the process around
the library) and `internals`; `text` (tokenizers) and `encoder` (the network); `heads` (the task
outputs and their losses), `data` (text to records) and `evaluation` (the official metrics);
`models` (a Keras model per task); `checkpoints` (original, Keras and Hugging Face weights) and
`export` (SavedModels for TF Serving); `training` (the step, the optimizer, the fine-tuning
run); `tasks` (one module per script). A room imports only from the floors below it.

Everything is loaded on first use, so that `from modeling.text import tokenization` (data
pipelines, worker processes) never imports TensorFlow.
"""
import importlib

_LAZY = {
    "BertConfig": ("modeling.encoder.config", "BertConfig"),
    "BertModel": ("modeling.encoder.bert_model", "BertModel"),
    "BertPretrainer": ("modeling.models.pretraining", "BertPretrainer"),
    "GraphTokenizer": ("modeling.text.graph_tokenizer", "GraphTokenizer"),
    "BertInputPacker": ("modeling.text.graph_tokenizer", "BertInputPacker"),
}
_SUBMODULES = ("checkpoints", "data", "encoder", "evaluation", "export", "heads", "models",
               "runtime", "tasks", "text", "training")
__all__ = list(_LAZY) + list(_SUBMODULES)


def lazy_submodules(package):
    """A module `__getattr__` that imports `package.<name>` when `<name>` is first used."""
    def __getattr__(name):
        try:
            return importlib.import_module(f"{package}.{name}")
        except ModuleNotFoundError as error:
            if error.name != f"{package}.{name}":
                raise
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
    return __getattr__


_submodule = lazy_submodules(__name__)


def __getattr__(name):
    if name in _LAZY:
        module_name, attribute = _LAZY[name]
        value = getattr(importlib.import_module(module_name), attribute)
        globals()[name] = value
        return value
    return _submodule(name)
