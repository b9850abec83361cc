"""The encoder: BertConfig, its layers and BertModel, as the original's modeling.py."""
from modeling import lazy_submodules

__getattr__ = lazy_submodules(__name__)
