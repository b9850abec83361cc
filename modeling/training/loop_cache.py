"""Keeps the training loop's traced graph on disk, for the next run of the same code and settings.

Python tracing the loop (the model, its loss, the gradients and the update: some 4,600 graph
operations at about 0.4 ms each) was most of a fine-tuning run's first step, and every run traced
it anew, although a rerun builds the same graph: 2.1 of 3.6 s with warm XLA caches
(benchmarks/history/first_step.md). The first run keeps the loop's graph, the functions of its
library with the variables it reads listed by position; a later run with the same key registers
them with TensorFlow and calls the loop with its own iterator and variables, tracing nothing.

The key is everything the graph is built from, so that a run never gets a graph another code or
setting traced: the source of the library and of every class the model, objective and optimizer
are made of; the TensorFlow, Keras and Python versions; the objective's and the config's
attributes, each layer's settings, the optimizer's config (its learning-rate schedule), the
precision, the devices; every variable's name, shape and dtype; the batches' structure. A change
to any gives a new entry; an entry that does not read whole is passed over with a warning.

Only a loop of one replica on one worker is kept: a cluster's collectives are keyed per process.
"""
import hashlib
import inspect
import json
import os
import pathlib
import re
import shutil
import sys
import tempfile

import keras
import tensorflow as tf
from absl import logging
from tensorflow.core.framework import function_pb2

from modeling import internals

FORMAT = 1
LIBRARY = "library.pb"
ENTRY = "entry.json"
LOADED = "Loaded the training loop traced by an earlier run"
_PACKAGE = pathlib.Path(__file__).resolve().parents[1]  # modeling/
_UNIQUE_NUMBER = re.compile(r"_\d+(?=/|:|$)")
_VERSIONED = ("tensorflow", "keras", "builtins")  # keyed by their versions, not their source


def key(trainer, iterator):
    """The entry's name for `trainer`'s loop over `iterator`'s batches (hex)."""
    model = trainer.model
    layers = internals.all_layers(model)
    classes = [type(trainer.objective), type(trainer.optimizer),
               type(trainer.optimizer.schedule), type(trainer)] + [type(l) for l in layers]
    parts = {
        "format": FORMAT,
        "versions": [tf.__version__, keras.__version__, sys.version],
        "source": _source_digest(classes),
        "objective": _settings(trainer.objective),
        "config": _settings(trainer.config),
        "layers": [[type(l).__qualname__, l.dtype_policy.name, _settings(l)] for l in layers],
        "optimizer": trainer.optimizer.get_config(),
        "trainer": [trainer.num_accumulation_steps, trainer.parallel_micro_batches,
                    bool(trainer.loss_scale), trainer.use_xla, keras.config.floatx()],
        "devices": [d.name for d in tf.config.list_logical_devices()],
        "strategy": type(trainer.strategy).__qualname__,
        "variables": [_variable_signature(v) for v in trainer.loop_variables()],
        "batches": repr(iterator.element_spec),
    }
    text = json.dumps(parts, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def load(directory, entry_key, variables, iterator):
    """The loop kept under `entry_key` in `directory`, registered with TensorFlow, or None when
    there is none or it does not read whole (a warning names it, and it is removed).

    Returns:
      callable(iterator, steps) -> the loop's dict of outputs, with `update_programs` (what
      `keep` was given), or None.
    """
    path = os.path.join(directory, entry_key)
    if not os.path.isdir(path):
        return None
    try:
        with open(os.path.join(path, ENTRY), encoding="utf-8") as file:
            entry = json.load(file)
        with open(os.path.join(path, LIBRARY), "rb") as file:
            data = file.read()
        if entry.get("format") != FORMAT or hashlib.sha256(data).hexdigest() != entry["sha256"]:
            raise ValueError("its library is not the one its entry describes")
        if entry["explicit_inputs"] != len(_flat_inputs(iterator, 0)):
            raise ValueError("its inputs are not this run's batches and step count")
        loop = _registered(function_pb2.FunctionDefLibrary.FromString(data), entry, variables)
    except (OSError, ValueError, KeyError, TypeError, tf.errors.OpError) as error:
        logging.warning("--xla_cache_dir: passing over the kept training loop %s (%s); tracing "
                        "it anew", path, error)
        shutil.rmtree(path, ignore_errors=True)
        return None
    logging.info("%s (%s)", LOADED, path)
    return loop


def keep(directory, entry_key, concrete_function, variables, update_programs):
    """Keeps `concrete_function` (the traced loop) under `entry_key` in `directory` (written
    whole to a temporary directory, then renamed; a failure is logged and the run goes on), and
    registers it as a run that loads it would. `update_programs` (`compile_ahead.describe`'s,
    JSON) is kept beside it, for a later run to compile them ahead as this one does.

    The run that traces the loop runs it as kept: XLA's cache knows the compiled passes by
    their functions' names, and a later run must find what this one compiled.

    Returns:
      callable(iterator, steps) -> the loop's dict of outputs, with `update_programs`; None
      for a loop that reads anything but `variables`, or returns anything but a dict of
      tensors: not kept.
    """
    handles = {id(_handle(v)): index for index, v in enumerate(variables)}
    captures = []
    for tensor in concrete_function.captured_inputs:
        if id(tensor) not in handles:
            logging.info("The training loop reads %s %s besides the variables: not kept for the "
                         "next run", tensor.dtype.name, tensor.shape)
            return None
        index = handles[id(tensor)]
        captures.append([index, _variable_signature(variables[index])])
    structure = concrete_function.structured_outputs
    if not (isinstance(structure, dict) and all(tf.is_tensor(v) for v in structure.values())):
        return None
    library = function_pb2.FunctionDefLibrary()
    library.CopyFrom(concrete_function.graph.as_graph_def().library)
    library.function.add().CopyFrom(concrete_function.function_def)
    _rename_functions(library, kept_name("", entry_key))
    data = library.SerializeToString()
    entry = {"format": FORMAT, "sha256": hashlib.sha256(data).hexdigest(),
             "function": kept_name(concrete_function.function_def.signature.name, entry_key),
             "explicit_inputs": len(concrete_function.inputs) - len(captures),
             "captures": captures, "outputs": sorted(structure),
             "update_programs": update_programs}
    _write(directory, entry_key, data, entry)
    try:
        return _registered(library, entry, variables)
    except (ValueError, tf.errors.OpError) as error:
        logging.warning("The traced training loop cannot be registered (%s); running it as "
                        "traced", error)
        return None


def kept_name(name, entry_key):
    """The name a function traced as `name` has in the library kept under `entry_key`.

    Function names carry a counter of the process that traced them: suffixed with the key,
    they cannot meet another function a process traces under the same name."""
    return f"{name}_{entry_key[:12]}"


def _registered(library, entry, variables):
    captured = []
    for index, signature in entry["captures"]:
        if index >= len(variables) or _variable_signature(variables[index]) != signature:
            raise ValueError(f"it reads a variable this run lacks: {signature}")
        captured.append(variables[index])
    for function in library.function:
        internals.register_function(function)
    name, outputs = entry["function"], entry["outputs"]

    def loop(iterator, steps):
        inputs = _flat_inputs(iterator, steps) + [_handle(v) for v in captured]
        return dict(zip(outputs, internals.call_function(name, inputs, len(outputs))))
    loop.update_programs = entry["update_programs"]
    return loop


def _write(directory, entry_key, data, entry):
    path, temporary = os.path.join(directory, entry_key), None
    try:
        os.makedirs(directory, exist_ok=True)
        temporary = tempfile.mkdtemp(prefix=".", dir=directory)
        with open(os.path.join(temporary, LIBRARY), "wb") as file:
            file.write(data)
        with open(os.path.join(temporary, ENTRY), "w", encoding="utf-8") as file:
            json.dump(entry, file)
        os.rename(temporary, path)
        temporary = None
        logging.info("Kept the traced training loop for the next run in %s", path)
    except OSError as error:  # another run kept the same entry first, or the disk refused
        if not os.path.isdir(path):
            logging.warning("--xla_cache_dir: cannot keep the traced training loop in %s (%s)",
                            directory, error.strerror or error)
    finally:
        if temporary:
            shutil.rmtree(temporary, ignore_errors=True)


def _flat_inputs(iterator, steps):
    return tf.nest.flatten(iterator, expand_composites=True) + [steps]


def _handle(variable):
    """The resource handle a traced function captures for a Keras or TensorFlow variable."""
    return variable.handle if isinstance(variable, tf.Variable) else variable.value.handle


def _variable_signature(variable):
    """Name, shape and dtype; the name without the numbers Keras makes names unique by in a
    process ("dropout_13"), which depend on what the process built before."""
    name = _UNIQUE_NUMBER.sub("", getattr(variable, "path", None) or variable.name)
    return [name, list(variable.shape), tf.as_dtype(variable.dtype).name]


def _source_digest(classes):
    """sha256 of the library's source and of every other module defining one of `classes`
    (a user's own objective or layer); TensorFlow's and Keras's go by their versions."""
    files = set(_PACKAGE.rglob("*.py"))
    for cls in classes:
        for base in cls.__mro__:
            if base.__module__.split(".")[0] not in _VERSIONED:
                source = inspect.getsourcefile(base)
                if source:
                    files.add(pathlib.Path(source).resolve())
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(str(path.relative_to(_PACKAGE.parent) if path.is_relative_to(
            _PACKAGE.parent) else path.name).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _settings(value):
    """An object's plain attributes (rates, sizes, flags, label lists): what the code building
    the graph may branch on. Not what it holds besides (a task's examples, other objects)."""
    def plain(item):
        if isinstance(item, (list, tuple)):
            return all(map(plain, item))
        return isinstance(item, (bool, int, float, str, type(None)))
    return {name: item for name, item in sorted(vars(value).items())
            if name != "name" and plain(item)}


def _rename_functions(library, suffix):
    names = {function.signature.name for function in library.function}

    def renamed(attr_value):
        if attr_value.HasField("func"):
            fix(attr_value.func)
        for function in attr_value.list.func:
            fix(function)

    def fix(name_attr_list):
        if name_attr_list.name in names:
            name_attr_list.name += suffix
        for value in name_attr_list.attr.values():
            renamed(value)

    for function in library.function:
        function.signature.name += suffix
        for node in function.node_def:
            if node.op in names:
                node.op += suffix
            for value in node.attr.values():
                renamed(value)
        for value in function.attr.values():
            renamed(value)
    for gradient in library.gradient:
        gradient.function_name += suffix if gradient.function_name in names else ""
        gradient.gradient_func += suffix if gradient.gradient_func in names else ""
