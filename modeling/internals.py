"""Every private TensorFlow and Keras name the library relies on, and only here.

Any minor release may rename these without notice. An override of a renamed hook is not an
error: it is simply no longer called, and the optimizer would then update differently without a
word. `missing()` lists the names the installed versions lack, and `tests/test_internals.py`
fails naming them (and on any private TensorFlow or Keras name used outside this module).

Nothing here imports the rest of the library: every floor may import it. One experimental XLA
flag lives in `runtime.cpu_kernels` instead, which must not import TensorFlow;
tests/test_runtime_cpu_kernels.py names it if XLA no longer knows it.
"""
import importlib

import keras
import tensorflow as tf

# keras.optimizers.Optimizer's hooks that `training.optimization.AdamWeightDecay` overrides:
# each large variable updated by a compiled pass of its own under tf.distribute, the compiled
# passes chained within one trace, and gradients taken as already summed over replicas.
OPTIMIZER_HOOKS = ("_distributed_tf_update_step", "_backend_update_step",
                   "_all_reduce_sum_gradients")
# TensorFlow's own test of "is this graph being compiled by XLA" (tf.function(jit_compile=True)
# and TPU replication trace inside an XLA context); TensorFlow's gradients use it the same way.
_CONTROL_FLOW_UTIL = "tensorflow.python.ops.control_flow_util"
# The eager context, which runs a function registered from its FunctionDef by name, as
# tf.function's own calls do (`training.loop_cache` calls a loop traced by an earlier run).
_CONTEXT = "tensorflow.python.eager.context"


def variable_index(optimizer, variable):
    """The position of `variable` (or of a replica's component of it) in the optimizer's
    variables, hence of its slots."""
    return optimizer._get_variable_index(variable)


def all_layers(model):
    """`model` and every layer nested in it, depth first."""
    return model._flatten_layers()


def in_xla_context():
    """Whether the graph being built is compiled by XLA."""
    control_flow_util = importlib.import_module(_CONTROL_FLOW_UTIL)
    return control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph())


def register_function(function_def):
    """Makes the function of `function_def` (a FunctionDef) callable by its name."""
    importlib.import_module(_CONTEXT).context().add_function_def(function_def)


def call_function(name, inputs, num_outputs):
    """Runs the registered function `name` on `inputs` (tensors, in its signature's order)
    with the options of the calls of tf.functions (grappler's, `trainer.graph_optimizer`).

    Returns:
      list of its `num_outputs` output tensors.
    """
    return importlib.import_module(_CONTEXT).context().call_function(
        name.encode(), inputs, num_outputs)


def missing():
    """The private names above that the installed TensorFlow and Keras do not have.

    Returns:
      list of dotted names, empty when everything is there.
    """
    wanted = [("keras.optimizers.Optimizer", keras.optimizers.Optimizer, name)
              for name in OPTIMIZER_HOOKS + ("_get_variable_index",)]
    wanted.append(("keras.layers.Layer", keras.layers.Layer, "_flatten_layers"))
    try:
        wanted.append((_CONTROL_FLOW_UTIL, importlib.import_module(_CONTROL_FLOW_UTIL),
                       "GraphOrParentsInXlaContext"))
    except ImportError:
        wanted.append(("tensorflow.python.ops", None, "control_flow_util"))
    try:
        context = importlib.import_module(_CONTEXT).context()
        wanted += [(_CONTEXT + ".context()", context, name)
                   for name in ("add_function_def", "call_function")]
    except (ImportError, AttributeError):
        wanted.append(("tensorflow.python.eager", None, "context"))
    return [f"{label}.{name}" for label, owner, name in wanted if not hasattr(owner, name)]
