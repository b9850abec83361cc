"""Checkpoints: the original name-based format, Keras files, and Hugging Face folders."""
from modeling import lazy_submodules

__getattr__ = lazy_submodules(__name__)
