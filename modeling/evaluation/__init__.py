"""The official metrics: GLUE, SQuAD (and its answer extraction), conlleval. No TensorFlow."""
from modeling import lazy_submodules

__getattr__ = lazy_submodules(__name__)
