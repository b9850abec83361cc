"""Queries a run_classifier.py SavedModel the way a serving client would: TensorFlow and
tensorflow-text only. Of this project it imports two modules of modeling/runtime alone (no
TensorFlow): cpu_kernels.py, for oneDNN's kernels on any x86 CPU, and quiet.py, to keep
TensorFlow's start-up lines off stderr. It prints the signatures, then a line per text:
the label, the probabilities and the text (or, for regression, the score and the text).

  python query_savedmodel.py EXPORT_DIR "first sentence" "second sentence" ...

EXPORT_DIR is the --export_dir of run_classifier.py (its newest numbered version is used) or one
version folder. For sentence-pair models, give each pair as "text_a ||| text_b".
"""
from modeling.runtime import cpu_kernels, quiet

cpu_kernels.choose()  # before TensorFlow loads: the CPU kernels measured fastest
quiet.install()  # before TensorFlow loads: its start-up noise off stderr

import importlib
import os
import sys

import tensorflow as tf

importlib.import_module("tensorflow_text")  # registers the in-graph tokenizer's ops


def newest_version(export_dir):
    """The newest numbered version in `export_dir`, or `export_dir` itself.

    Raises:
      ValueError: naming the folder, if it is none or holds no SavedModel.
    """
    if not os.path.isdir(export_dir):
        problem = "is a file, not a folder" if os.path.exists(export_dir) else "does not exist"
        raise ValueError(f"EXPORT_DIR {export_dir} {problem}")
    versions = [name for name in os.listdir(export_dir) if name.isdigit()]
    version = os.path.join(export_dir, max(versions, key=int)) if versions else export_dir
    if not os.path.isfile(os.path.join(version, "saved_model.pb")):
        raise ValueError(f"EXPORT_DIR {version} holds no saved_model.pb: give the --export_dir "
                         f"of run_classifier.py or one of its version folders")
    return version


def main(export_dir, texts):
    try:
        version = newest_version(export_dir)
    except ValueError as error:  # the scripts' one line and exit status (modeling/runtime/cli.py)
        print(f"{os.path.basename(sys.argv[0])}: error: {error}", file=sys.stderr)
        sys.exit(2)
    signatures = tf.saved_model.load(version).signatures
    print(f"{version}: signatures")
    for name, function in sorted(signatures.items()):
        print(f"  {name}({', '.join(sorted(function.structured_input_signature[1]))}) -> "
              f"{', '.join(sorted(function.structured_outputs))}")
    serve = signatures["serving_default"]
    inputs = serve.structured_input_signature[1]
    pairs = [text.split(" ||| ", 1) + [""] for text in texts]
    args = {"text_a": tf.constant([pair[0] for pair in pairs])}
    if "text_b" in inputs:
        args["text_b"] = tf.constant([pair[1] for pair in pairs])
    outputs = serve(**args)
    for index, text in enumerate(texts):
        if "predictions" in outputs:
            print(f"{float(outputs['predictions'][index]):.4f}\t{text}")
        else:
            label = outputs["labels"][index].numpy().decode()
            probabilities = " ".join(f"{p:.3f}" for p in outputs["probabilities"][index].numpy())
            print(f"{label}\t[{probabilities}]\t{text}")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2:])
