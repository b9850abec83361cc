"""Compiles the optimizer's update passes while a training loop's first call starts.

A run's first step meets its XLA programs one after another, as the step reaches them: the
forward and backward passes, then the update's, one for each shape of variable (nine for MiniLM,
0.5 s of a 3.4 s first step cold; loaded from --xla_cache_dir, 0.1 s of a 1.2 s one warm:
benchmarks/history/first_step.md), although the variables' shapes are known before the loop
runs. A thread compiles (or loads) those beside the loop's instantiation and its forward pass,
on the machine's other cores, and the loop's own calls find them compiled (or wait for the
compilation under way: XLA compiles a program once). A loop traced in this run describes its
programs (`describe`); a loop an earlier run kept (`loop_cache`) keeps their description beside
it.

XLA keys a program by the call's function name and attributes besides its arguments' shapes. A
function called by its name alone carries other attributes than the loop's call node, and XLA
would compile it again; so the thread calls a function of one node, a copy of the loop's call
node, on zero-filled variables and tensors of the update's shapes (`AdamWeightDecay.
compiled_updates`). Those zeros are allocated one program at a time, and not at all for a
program whose zeros would exceed MAX_BYTES (a large vocabulary's embeddings: the step compiles
it). A failure is logged and leaves the step to compile as before.
"""
import base64
import threading
import time

import tensorflow as tf
from absl import logging
from tensorflow.core.framework import function_pb2

from modeling import internals

MAX_BYTES = 512 << 20  # of one program's zero-filled inputs


def describe(calls):
    """The distinct programs of `calls` as plain data (JSON) for `start`.

    Args:
      calls: the update's compiled calls as traced into the loop, (call op, variable shape,
        variable dtype) each.

    Returns:
      [{"node": the call node (a NodeDef, base64), "function": the traced function's name,
      "shape", "dtype": the variable's, "inputs": [[dtype name, rank], ...], "outputs":
      [dtype name, ...]}, ...].
    """
    return [{"node": base64.b64encode(op.node_def.SerializeToString()).decode("ascii"),
             "function": name, "shape": list(shape), "dtype": dtype.name,
             "inputs": [[tensor.dtype.name, tensor.shape.rank] for tensor in op.inputs],
             "outputs": [tensor.dtype.name for tensor in op.outputs]}
            for (name, shape, dtype), op in distinct_programs(calls).items()]


def start(programs, kept_name):
    """Starts compiling `programs`.

    Args:
      programs: `describe`'s list.
      kept_name: the name the loop's kept library gives a traced function's name
        (`loop_cache.kept_name`), under which the loop calls it.

    Returns:
      The thread, to join before the process ends; None where there is nothing to compile.
    """
    if not programs:
        return None
    thread = threading.Thread(target=_compile, args=(programs, kept_name),
                              name="compile_ahead", daemon=True)
    thread.start()
    return thread


def distinct_programs(calls):
    """{(function name, shape, dtype): a call op} of `calls`, each program once, but those whose
    zero-filled inputs would exceed MAX_BYTES."""
    programs = {}
    for op, shape, dtype in calls:
        if _input_bytes(op, shape, dtype) <= MAX_BYTES:
            programs.setdefault((op.get_attr("f").name, tuple(shape), dtype), op)
    return programs


def _compile(programs, kept_name):
    started, registered = time.perf_counter(), set()
    try:
        for program in programs:
            caller = _caller(program, kept_name(program["function"]))
            if caller.signature.name not in registered:
                internals.register_function(caller)
                registered.add(caller.signature.name)
            shape, dtype = program["shape"], tf.as_dtype(program["dtype"])
            variables = []  # alive until the call has run
            inputs = []
            for type_name, rank in program["inputs"]:
                input_dtype = tf.as_dtype(type_name)
                if input_dtype == tf.resource:  # the weights and their slots
                    variables.append(tf.Variable(tf.zeros(shape, dtype)))
                    inputs.append(variables[-1].handle)
                elif rank == 0:  # learning rate, step, scale, condition
                    inputs.append(tf.ones([], input_dtype))
                else:  # the gradient
                    inputs.append(tf.zeros(shape, input_dtype))
            internals.call_function(caller.signature.name, inputs, len(program["outputs"]))
    except Exception as error:  # noqa: BLE001 (a thread's error would only print a traceback)
        logging.warning("Compiling the optimizer's update ahead of the first step failed (%s); "
                        "the step compiles it", error)
        return
    logging.info("Compiled the optimizer's %d update passes beside the first step in %.2f s",
                 len(programs), time.perf_counter() - started)


def _input_bytes(op, shape, dtype):
    """The bytes of the zeros `_compile` makes for a call `op` on a variable of `shape`."""
    arrays = sum(tensor.dtype == tf.resource or tensor.shape.rank != 0 for tensor in op.inputs)
    return arrays * shape.num_elements() * dtype.size


def _caller(program, function_name):
    """A FunctionDef whose one node is `program`'s call node (of the loop's graph) calling
    `function_name`, on arguments of the node's input types."""
    caller = function_pb2.FunctionDef()
    caller.signature.name = f"{function_name}_ahead"
    caller.signature.is_stateful = True
    node = caller.node_def.add()
    node.ParseFromString(base64.b64decode(program["node"]))
    node.name = "call"
    node.attr["f"].func.name = function_name
    del node.input[:]
    for index, (type_name, _) in enumerate(program["inputs"]):
        argument = caller.signature.input_arg.add()
        argument.name, argument.type = f"input_{index}", tf.as_dtype(type_name).as_datatype_enum
        node.input.append(argument.name)
    for index, type_name in enumerate(program["outputs"]):
        output = caller.signature.output_arg.add()
        output.name, output.type = f"output_{index}", tf.as_dtype(type_name).as_datatype_enum
        caller.ret[output.name] = f"call:output:{index}"
    return caller
