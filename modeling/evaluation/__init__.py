"""The official metrics: GLUE, SQuAD (and its answer extraction), conlleval; and what guessing
scores on them (baseline). No TensorFlow."""
from modeling import lazy_submodules

__getattr__ = lazy_submodules(__name__)
