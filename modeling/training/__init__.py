"""Training on any tf.distribute strategy: the step, the original optimizer, the input pipeline and the fine-tuning run."""
from modeling import lazy_submodules

__getattr__ = lazy_submodules(__name__)
