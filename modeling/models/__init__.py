"""The Keras models the original scripts build: the encoder with one task's heads, under the
original's variable names. One module per task."""
from modeling import lazy_submodules

__getattr__ = lazy_submodules(__name__)
