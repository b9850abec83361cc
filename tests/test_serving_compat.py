"""Every export, written by this TensorFlow (2.21), answers the same in TF Serving 2.20
(TensorFlow 2.20 with tensorflow-text 2.20's ops): through 2.20's TF1 session loader (the
SavedModel's restore op, tensors fed and fetched by name), 2.20's `tf.saved_model.load` and
TF Serving's C++ loader built from the 2.20 wheel, each equal to 2.21's `tf.saved_model.load`
(floats to 1e-5, strings and ints exactly).

Opt-in, as it needs a second TensorFlow: `.ci/serving-compat` makes a venv of tensorflow 2.20.0
and tensorflow-text 2.20.1 and runs this file with TF_SERVING_COMPAT_PYTHON set to its Python.
The default suite checks the ops and attrs of every export against 2.20's instead
(test_export.py: test_tf_serving_2_20_registers_every_exported_op_and_attr).
"""
import os
import subprocess

import numpy as np
import pytest

from serving import assert_same_outputs, serve_many, serve_once, serve_once_binary
from test_export import EXPORTS, OTHER_EXPORTS, save_exports

PYTHON = os.environ.get("TF_SERVING_COMPAT_PYTHON")
VERSIONS = "2.20.0 2.20.1"  # tensorflow, tensorflow-text: TF Serving 2.20's

pytestmark = pytest.mark.skipif(
    not PYTHON, reason="opt-in: .ci/serving-compat runs it with TensorFlow 2.20 "
                       "(TF_SERVING_COMPAT_PYTHON=a Python with tensorflow 2.20.0)")


def fed_by_serve_once(inputs):
    """The request as serve_once's (strings, int32) inputs, or None: it feeds 1-D strings and
    2-D ints only (not multiple choice's `endings` [B, choices])."""
    arrays = {name: np.asarray(value) for name, value in inputs.items()}
    strings = {name: value.tolist() for name, value in arrays.items()
               if value.dtype.kind == "U" and value.ndim == 1}
    int32 = {name: value for name, value in arrays.items()
             if value.dtype.kind == "i" and value.ndim == 2}
    if len(strings) + len(int32) < len(arrays) or any(rows == [""] for rows in strings.values()):
        return None  # and a single empty row, which serve_once reads as no row
    return strings, int32


def largest_difference(actual, expected):
    """The largest absolute difference of the float outputs (0.0 when there are none)."""
    return max((float(np.max(np.abs(np.asarray(actual[name], np.float64) - value), initial=0))
                for name, value in ((name, np.asarray(value)) for name, value in expected.items())
                if value.dtype.kind == "f"), default=0.0)


def test_every_export_answers_in_tf_serving_2_20_as_in_tf_2_21(tmp_path):
    """One line per export: its requests, the largest float difference, or what differs."""
    found = subprocess.run([PYTHON, "-c", "import tensorflow as tf, tensorflow_text as t; "
                            "print(tf.__version__, t.__version__)"], capture_output=True,
                           text=True, timeout=300).stdout.strip().splitlines()
    assert found[-1:] == [VERSIONS], f"{PYTHON} has tensorflow, tensorflow-text {found[-1:]}"
    try:
        serve_once_binary(PYTHON)
    except pytest.skip.Exception as error:  # this check is asked for: no loader is a failure
        pytest.fail(f"TF Serving's loader cannot be built against {PYTHON}: {error}")
    saved = save_exports(tmp_path, {**EXPORTS, **OTHER_EXPORTS})
    jobs = [(directory, requests, ()) for directory, requests in saved.values()]
    new, old = serve_many(jobs), serve_many(jobs, python=PYTHON)
    lines, failed = [], []
    for (name, (directory, requests)), new_answers, old_answers in zip(saved.items(), new, old):
        largest, served_once = 0.0, 0
        try:
            for (signature, inputs), expected, served in zip(requests, new_answers, old_answers):
                expected = expected["object_loader"]
                answers = {"session": served["session"], "tf.saved_model.load":
                           served["object_loader"]}
                fed = fed_by_serve_once(inputs)
                if fed is not None:
                    status, outputs, stderr = serve_once(directory, signature, *fed,
                                                         python=PYTHON)
                    assert status == 0, f"{signature}: serve_once: {stderr[-2000:]}"
                    answers["serve_once"], served_once = outputs, served_once + 1
                for loader, answer in answers.items():
                    try:
                        assert_same_outputs(answer, expected)
                    except AssertionError as error:
                        raise AssertionError(f"{signature}, {loader}: {error}") from None
                    largest = max(largest, largest_difference(answer, expected))
        except AssertionError as error:
            failed.append(name)
            lines.append(f"{name}: DIFFERS in TF 2.20: {' '.join(str(error).split())[:600]}")
            continue
        signatures = ", ".join(sorted({signature for signature, _ in requests}))
        once = ("serve_once" if served_once == len(requests) else
                f"serve_once on {served_once} (it feeds no 2-D strings)")
        lines.append(f"{name}: {len(requests)} request(s) of {signatures} equal in TF 2.20's "
                     f"session, tf.saved_model.load, {once}; largest float difference "
                     f"{largest:.1e}")
    print("\n" + "\n".join(lines))
    assert not failed, f"answers differ in TF Serving 2.20: {failed}"
