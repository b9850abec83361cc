"""One module per script: the task's objective (its model and loss), input reading and
predictions."""
from modeling import lazy_submodules

__getattr__ = lazy_submodules(__name__)
