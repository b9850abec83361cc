"""Text to records, one module per task, as the original's scripts write them. No TensorFlow."""
from modeling import lazy_submodules

__getattr__ = lazy_submodules(__name__)
