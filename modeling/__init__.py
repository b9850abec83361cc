"""BERT as the original release defines it, on TensorFlow 2 / Keras 3.

The names users reach for live here; submodules (`checkpoint`, `tokenization`, `layers`, ...)
hold the rest.
"""
from modeling.config import BertConfig
from modeling.bert_model import BertModel
from modeling.heads import BertPretrainer
from modeling import checkpoint

__all__ = ["BertConfig", "BertModel", "BertPretrainer", "checkpoint"]
