"""Tokenizers: the original's pure-Python FullTokenizer, its in-graph twin, and vocabulary learning."""
from modeling import lazy_submodules

__getattr__ = lazy_submodules(__name__)
