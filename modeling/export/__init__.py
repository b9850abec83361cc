"""SavedModels for TF Serving: raw text in, tokenized in the graph, the task's outputs out.

The exported module needs only TensorFlow and tensorflow-text to load (`import tensorflow_text`
registers the tokenizer's ops); nothing of this project. Every export is a `ServingModule`, so
it loads in TF Serving's C++ loader (MetaGraph import, the SavedModel's restore op, a session
fed and fetched by tensor name) as well as in `tf.saved_model.load`. One module a task. Each
version carries TF Serving's warm-up requests for every signature (`warmup`).
"""
from modeling.export.base import LABELS_ASSET, ServingModule, save_versioned
from modeling.export.classifier import ClassifierExport, DocumentClassifierExport
from modeling.export.multiple_choice import MultipleChoiceExport
from modeling.export.ner import NerExport
from modeling.export.squad import SquadExport

__all__ = ["LABELS_ASSET", "ServingModule", "save_versioned", "ClassifierExport",
           "DocumentClassifierExport", "MultipleChoiceExport", "NerExport", "SquadExport"]
