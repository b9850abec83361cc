"""Writes every op the running TensorFlow registers, with tensorflow-text's op libraries, and
each op's attr names: what a model server of that TensorFlow can load. It imports nothing of
this project, so that it runs in a venv of another TensorFlow:

    python3 -m venv /tmp/venv-tf220
    /tmp/venv-tf220/bin/pip install tensorflow==2.20.0 tensorflow-text==2.20.1
    /tmp/venv-tf220/bin/python tools/list_registered_ops.py tests/golden/tf2.20_registered_ops.txt

The file: header lines starting with "#" (the versions and the command), then one line per
op, sorted: the op's name, then its attr names, sorted, separated by spaces.
tests/test_export.py checks every export's ops and attrs against it.
"""
import argparse
import glob
import os
import sys
import tempfile

import tensorflow as tf
import tensorflow_text
from tensorflow.core.framework import op_def_pb2
from tensorflow.python.client import pywrap_tf_session


def text_op_libraries():
    """Every tensorflow-text op library (TF Serving links them all in), sorted."""
    return sorted(glob.glob(os.path.join(os.path.dirname(tensorflow_text.__file__),
                                         "python", "ops", "*.so")))


def registered_ops():
    """Every OpDef in the process's op registry (core ops and loaded libraries'): {name: OpDef}."""
    buffer = pywrap_tf_session.TF_GetAllOpList()
    try:
        op_list = op_def_pb2.OpList.FromString(pywrap_tf_session.TF_GetBuffer(buffer))
    finally:
        pywrap_tf_session.TF_DeleteBuffer(buffer)
    return {op.name: op for op in op_list.op}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output", help="the file to write, e.g. "
                        "tests/golden/tf2.20_registered_ops.txt")
    args = parser.parse_args()
    libraries = text_op_libraries()
    for library in libraries:  # `import tensorflow_text` loads them; this makes sure of all
        tf.load_op_library(library)
    ops = registered_ops()
    if "FastWordpieceTokenizeWithOffsets" not in ops:
        sys.exit("tensorflow-text's ops are not registered")
    header = [
        f"# Ops registered by TensorFlow {tf.__version__} with tensorflow-text "
        f"{tensorflow_text.__version__}'s {len(libraries)} op libraries "
        f"(tensorflow_text/python/ops/*.so): {len(ops)} ops.",
        "# Each line: an op's name, then its attr names. Made by:",
        f"#   pip install tensorflow=={tf.__version__} tensorflow-text=="
        f"{tensorflow_text.__version__}",
        f"#   python tools/list_registered_ops.py {args.output}",
    ]
    lines = [" ".join([name, *sorted(attr.name for attr in ops[name].attr)])
             for name in sorted(ops)]
    directory = os.path.dirname(os.path.abspath(args.output))
    with tempfile.NamedTemporaryFile("w", dir=directory, delete=False, encoding="utf-8") as file:
        file.write("\n".join(header + lines) + "\n")
    os.chmod(file.name, 0o644)
    os.replace(file.name, args.output)  # atomic: never half a list
    print(f"{args.output}: {len(ops)} ops")


if __name__ == "__main__":
    main()
