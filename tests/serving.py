"""Serves an exported SavedModel the ways users do, from processes that know nothing of ours.

- `serve(...)`: a fresh Python process that imports only `tensorflow` and `tensorflow_text`
  runs each request through `tf.saved_model.load` (the TF2 object loader) and through the TF1
  session loader (MetaGraph import, the SavedModel's restore op, then `Session.run` fed and
  fetched by the signature's tensor names, in any shape: what TF Serving's C++ loader does;
  one session an export, as a server holds it). `serve_many`
  and `serve_once` take another Python too: another TensorFlow's venv.
- `serve_once(...)`: TF Serving's C++ loader itself (`tensorflow::LoadSavedModel`), through
  the `serve_once` program of ../shared/tools/tf_serving_loader, built here from the wheel.
"""
import fcntl
import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import pytest
import tensorflow as tf

from conftest import SHARED
from scripts import script_env

_CLIENT = r"""
import json, os, sys
import numpy as np
import tensorflow as tf
import tensorflow_text  # registers the tokenizer's ops, as TF Serving links them
from tensorflow.core.protobuf import saved_model_pb2

jobs = json.load(open(sys.argv[1], encoding="utf-8"))  # [[export_dir, requests], ...]


def plain(value):
    value = np.asarray(value)
    if value.dtype == object:
        return np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(value).tolist()
    return value.tolist()


def as_array(spec, dtype):
    dtype = object if dtype == tf.string else dtype.as_numpy_dtype
    return np.array(spec["value"], dtype=dtype).reshape(spec["shape"])


def by_object_loader(loaded, signature, inputs):
    function = loaded.signatures[signature]
    specs = function.structured_input_signature[1]
    outputs = function(**{name: tf.constant(as_array(spec, specs[name].dtype), specs[name].dtype)
                          for name, spec in inputs.items()})
    return {name: plain(value.numpy()) for name, value in outputs.items()}


def signature_defs(export_dir):
    saved_model = saved_model_pb2.SavedModel.FromString(
        open(os.path.join(export_dir, "saved_model.pb"), "rb").read())
    return next(meta.signature_def for meta in saved_model.meta_graphs
                if "serve" in meta.meta_info_def.tags)


sessions = {}  # one per export, as a server holds one


def session_for(export_dir):
    # The export in a session of its own, every signature's inputs mapped to placeholders of
    # no shape: TF Serving's C++ feed checks no request's shape (Python's Session.run checks a
    # feed against its placeholder's), so that a request of any shape reaches the graph.
    if export_dir not in sessions:
        signatures = signature_defs(export_dir)
        graph = tf.Graph()
        with graph.as_default():
            placeholders = {info.name: tf.compat.v1.placeholder(tf.as_dtype(info.dtype), None)
                            for sig in signatures.values() for info in sig.inputs.values()}
            session = tf.compat.v1.Session(graph=graph)
            tf.compat.v1.saved_model.loader.load(session, ["serve"], export_dir,
                                                 input_map=placeholders)
        sessions[export_dir] = (session, signatures, placeholders)
    return sessions[export_dir]


def by_session(export_dir, signature, inputs):
    session, signatures, placeholders = session_for(export_dir)
    sig = signatures[signature]
    feeds = {}
    for name, spec in inputs.items():
        info = sig.inputs[name]
        feeds[placeholders[info.name]] = as_array(spec, tf.as_dtype(info.dtype))
    return run(session, sig, feeds)


def run(session, sig, feeds):
    try:
        outputs = session.run({key: info.name for key, info in sig.outputs.items()}, feeds)
    except tf.errors.OpError as error:
        return {"error": error.message}
    return {name: plain(value) for name, value in outputs.items()}


answers = []
for export_dir, requests in jobs:
    loaded = None if all(r["loose"] for r in requests) else tf.saved_model.load(export_dir)
    results = []
    for request in requests:
        signature, inputs = request["signature"], request["inputs"]
        result = {"session": by_session(export_dir, signature, inputs)}
        if not request["loose"]:
            result["object_loader"] = by_object_loader(loaded, signature, inputs)
        results.append(result)
    answers.append(results)
ours = sorted(name for name in sys.modules
              if name.split(".")[0] in ("modeling", "conftest", "serving", "scripts")
              or name.startswith("run_"))
print(json.dumps({"answers": answers, "our_modules": ours}))
"""


def _request(signature, inputs, loose=False):
    arrays = {name: np.asarray(value) for name, value in inputs.items()}
    return {"signature": signature, "loose": loose, "inputs": {
        name: {"value": value.tolist(), "shape": list(value.shape)}
        for name, value in arrays.items()}}


def serve(export_dir, requests, loose_requests=()):
    """Runs requests against the SavedModel in a TensorFlow-only process.

    Args:
      export_dir: a SavedModel version folder.
      requests: list of (signature name, {input name: array-like}), run by both loaders.
      loose_requests: the same, fed to the session loader in any shape (as TF Serving's C++
        feed does) and not to the TF2 loader (its signatures refuse other shapes before the
        graph runs).

    Returns:
      A list, one per request then one per loose request, of {"session": outputs,
      "object_loader": outputs} (outputs: a dict of nested lists, or {"error": message} when
      the graph refused the request; no "object_loader" for loose requests).
    """
    return serve_many([(export_dir, requests, loose_requests)])[0]


def serve_many(jobs, python=sys.executable):
    """`serve` for several (export_dir, requests, loose_requests), in one process of `python`
    (a Python with tensorflow and tensorflow_text: this one's, or another TensorFlow's)."""
    payload = [[str(directory), [_request(s, i, False) for s, i in requests]
                + [_request(s, i, True) for s, i in loose]] for directory, requests, loose in jobs]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as file:
        json.dump(payload, file)
    try:
        process = subprocess.run([python, "-c", _CLIENT, file.name],
                                 capture_output=True, text=True, timeout=600,
                                 env=script_env(PYTHONPATH=""), cwd=tempfile.gettempdir())
    finally:
        os.unlink(file.name)
    assert process.returncode == 0, process.stderr[-3000:]
    served = json.loads(process.stdout.splitlines()[-1])
    assert served["our_modules"] == [], "the client must need nothing of this project"
    return served["answers"]


WARMUP_FILE = "assets.extra/tf_serving_warmup_requests"  # the name TF Serving reads


def warmup_requests(export_dir):
    """The requests of an export's TF Serving warm-up file, as `serve` takes them: a list of
    (signature name, {input name: array}), strings decoded."""
    from tensorflow_serving.apis import prediction_log_pb2
    requests = []
    for record in tf.data.TFRecordDataset(os.path.join(str(export_dir), WARMUP_FILE)):
        request = prediction_log_pb2.PredictionLog.FromString(record.numpy()).predict_log.request
        inputs = {}
        for name, tensor in request.inputs.items():
            value = tf.make_ndarray(tensor)
            if value.dtype == object:
                value = np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(value)
            inputs[name] = value
        requests.append((request.model_spec.signature_name, inputs))
    return requests


def read_features(records, seq_length, names=("input_ids", "input_mask", "segment_ids")):
    """The int32 features of a TFRecord file of the scripts, {name: [records, seq_length]}."""
    spec = {name: tf.io.FixedLenFeature([seq_length], tf.int64) for name in names}
    parsed = tf.io.parse_example(list(tf.data.TFRecordDataset(str(records)).as_numpy_iterator()),
                                 spec)
    return {name: value.numpy().astype(np.int32) for name, value in parsed.items()}


def assert_same_outputs(actual, expected, atol=1e-5):
    """Outputs dicts equal: numbers to `atol`, strings exactly."""
    assert "error" not in actual, actual.get("error")
    assert sorted(actual) == sorted(expected)
    for name, value in expected.items():
        value, got = np.asarray(value), np.asarray(actual[name])
        assert got.shape == value.shape, name
        if value.dtype.kind in "fi":
            np.testing.assert_allclose(got, value, atol=atol, rtol=0, err_msg=name)
        else:
            assert got.tolist() == value.tolist(), name


@functools.lru_cache(maxsize=None)
def serve_once_binary(python=sys.executable):
    """Builds ../shared/tools/tf_serving_loader/serve_once against the TensorFlow of `python`
    (about 15-30 s); skips when it cannot be built here. The binary is kept in the temporary
    folder under a hash of what it is built from (the tool's files, `python`, its TensorFlow's
    libraries), so that the suite's workers build it once between them."""
    tool = SHARED / "tools/tf_serving_loader"
    if not (tool / "build.sh").exists():
        pytest.skip(f"{tool / 'build.sh'} is absent: TF Serving's loader is built from "
                    "../shared/tools")
    if not shutil.which(os.environ.get("CXX", "g++")):
        pytest.skip("no C++ compiler (g++ or $CXX) to build TF Serving's loader")
    libraries = package_folder("tensorflow", python)
    key = hashlib.sha256(os.path.realpath(python).encode())
    for path in sorted(path for path in tool.iterdir() if path.is_file()):
        key.update(path.name.encode() + path.read_bytes())
    for name in ("libtensorflow_cc.so.2", "libtensorflow_framework.so.2"):
        stat = os.stat(os.path.join(libraries, name))
        key.update(f"{name} {stat.st_size} {stat.st_mtime_ns}".encode())
    binary = os.path.join(tempfile.gettempdir(), f"serve_once-{key.hexdigest()[:16]}")
    with open(binary + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other worker waits for the build, not builds
        if not os.path.exists(binary):
            built = f"{binary}.{os.getpid()}"
            process = subprocess.run(["bash", str(tool / "build.sh"), built],
                                     capture_output=True, text=True,
                                     env=dict(os.environ, PYTHON=python), timeout=600)
            assert process.returncode == 0, f"serve_once did not build:\n{process.stderr[-3000:]}"
            os.replace(built, binary)
    return binary


def package_folder(package, python):
    """The installed folder of `package` in `python`, found without importing it."""
    process = subprocess.run([python, "-c", "import importlib.util, os, sys; print(os.path."
                              "dirname(importlib.util.find_spec(sys.argv[1]).origin))", package],
                             capture_output=True, text=True, check=True, timeout=60)
    return process.stdout.strip()


@functools.lru_cache(maxsize=None)
def text_op_libraries(python=sys.executable):
    """Every tensorflow-text op library of `python`: the model server links them all in."""
    directory = os.path.join(package_folder("tensorflow_text", python), "python/ops")
    return sorted(os.path.join(directory, name) for name in os.listdir(directory)
                  if name.endswith(".so"))


def serve_once(export_dir, signature, strings=None, int32=None, python=sys.executable):
    """Runs one request through TF Serving's C++ loader.

    Args:
      strings: {input name: list of str} (1-D string inputs; rows may not contain "|").
      int32: {input name: int array [rows, cols]}.
      python: the Python whose TensorFlow and tensorflow-text the loader is built from.

    Returns:
      (exit status, outputs dict of numpy arrays or None, stderr).
    """
    args = [serve_once_binary(python), str(export_dir), signature]
    args += [f"--op_library={path}" for path in text_op_libraries(python)]
    for name, rows in (strings or {}).items():
        assert not any("|" in row or "\n" in row for row in rows)
        args.append(f"--string={name}={'|'.join(rows)}")
    for name, value in (int32 or {}).items():
        value = np.asarray(value, np.int32)
        flat = ",".join(str(v) for v in value.reshape(-1))
        args.append(f"--int32={name}={value.shape[0]}x{value.shape[1]}:{flat}")
    process = subprocess.run(args, capture_output=True, text=True, timeout=300,
                             env=script_env())
    outputs = None
    if process.returncode == 0:
        outputs = {name: np.reshape(tensor["values"], tensor["shape"])
                   for name, tensor in json.loads(process.stdout.splitlines()[-1]).items()}
    return process.returncode, outputs, process.stderr
