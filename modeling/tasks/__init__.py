"""One module per script: the task's Keras model, its trainer, input reading and predictions."""
from modeling import lazy_submodules

__getattr__ = lazy_submodules(__name__)
