"""Picks the `tf.distribute` strategy the TPUEstimator scripts' flags describe, and feeds it."""
import contextlib
import json
import os
import tempfile

import tensorflow as tf

from modeling.runtime import host_memory

STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored", "tpu")


def get_strategy(name, tpu_name=None, tpu_zone=None, gcp_project=None, master=None):
    """Returns a strategy by name.

    one_device: the first GPU if there is one, else the CPU. mirrored: every local GPU (or
    every logical CPU device when there is no GPU, as the tests use). multi_worker_mirrored:
    the cluster in `TF_CONFIG`. tpu: the TPU named by `tpu_name` (or `master`), as the
    original's TPUClusterResolver flags.

    Raises:
      ValueError: an unknown name, or `tpu` without a TPU name or master.
    """
    if name == "one_device":
        gpus = tf.config.list_logical_devices("GPU")
        return tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else "/cpu:0")
    if name == "mirrored":
        gpus = tf.config.list_logical_devices("GPU")
        devices = [d.name for d in gpus or tf.config.list_logical_devices("CPU")]
        return tf.distribute.MirroredStrategy(devices)
    if name == "multi_worker_mirrored":
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "tpu":
        if not (tpu_name or master):
            raise ValueError("--distribution_strategy=tpu (or --use_tpu) needs --tpu_name or "
                             "--master")
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
            tpu=tpu_name or master, zone=tpu_zone, project=gcp_project)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    raise ValueError(f"Unknown distribution strategy {name!r}; expected one of {STRATEGIES}")


def check_tf_config():
    """Raises ValueError, naming TF_CONFIG and what is wrong in it, unless the variable that
    multi_worker_mirrored reads is unset or a cluster TensorFlow can join: TensorFlow's own
    errors name neither, and it takes JSON of another shape (`[]`) silently as one worker."""
    text = os.environ.get("TF_CONFIG", "")
    try:
        config = json.loads(text or "{}")
    except json.JSONDecodeError as error:
        raise ValueError(f"TF_CONFIG is not JSON: {error.msg} at line {error.lineno} column "
                         f"{error.colno} (char {error.pos})") from None
    problem = _cluster_problem(config)
    if problem:
        raise ValueError(f"TF_CONFIG={text}: {problem} (expected "
                         f'{{"cluster": {{"worker": ["host:port", ...]}}, '
                         f'"task": {{"type": "worker", "index": 0}}}})')


def _cluster_problem(config):
    """What keeps a decoded TF_CONFIG from naming a cluster and this process's task in it, or
    None (an empty object too: one local worker, as TensorFlow takes an unset variable)."""
    if not isinstance(config, dict):
        return f"a JSON {type(config).__name__}, not an object"
    cluster, task = config.get("cluster"), config.get("task")
    if not cluster:
        return "a task but no cluster" if task else None
    if not isinstance(cluster, dict) or not all(
            isinstance(addresses, list) and addresses for addresses in cluster.values()):
        return '"cluster" is not an object of jobs, each a list of addresses'
    if not isinstance(task, dict):
        return 'a cluster but no "task" for this process'
    kind, index = task.get("type"), task.get("index")
    if kind not in cluster:
        return f'the task\'s type {kind!r} is not a job of the cluster ({", ".join(cluster)})'
    if not isinstance(index, int) or not 0 <= index < len(cluster[kind]):
        return (f"the task's index {index!r} is not one of the {len(cluster[kind])} "
                f"{kind} addresses (0 to {len(cluster[kind]) - 1})")
    return None


def _is_default(strategy):
    """Whether `strategy` is TensorFlow's default (no strategy at all)."""
    return strategy is tf.distribute.get_strategy() and not tf.distribute.has_strategy()


def on_cpus(strategy):
    """Whether every replica of `strategy` runs on a CPU (the default strategy: where no
    accelerator is visible)."""
    if _is_default(strategy):
        return not any(tf.config.list_logical_devices(kind) for kind in ("GPU", "TPU"))
    return all(tf.DeviceSpec.from_string(device).device_type == "CPU"
               for device in strategy.extended.worker_devices)


def per_replica_batches(strategy, dataset):
    """An iterator over `dataset`'s global batches in the form `strategy.run` takes.

    On one CPU device (or with no strategy) the batches are the dataset's own: a distributed
    iterator would add only a MultiDeviceIterator, whose construction pins glibc's malloc
    policy (`host_memory`). Any other strategy gets its distributed iterator, and the policy is
    put back after it.

    Args:
      dataset: a `tf.data.Dataset` of global batches, with the sharding options it needs.
    """
    one_cpu = isinstance(strategy, tf.distribute.OneDeviceStrategy) and on_cpus(strategy)
    if _is_default(strategy) or one_cpu:
        return iter(dataset)
    iterator = iter(strategy.experimental_distribute_dataset(dataset))
    host_memory.restore()
    return iterator


def is_chief(strategy):
    """Only the chief writes logs, summaries and the files others do not need: the task
    `chief` if the cluster has one, else worker 0, else the only process."""
    resolver = getattr(strategy, "cluster_resolver", None)
    spec = resolver.cluster_spec().as_dict() if resolver is not None else {}
    if not spec or resolver.task_type is None:
        return True
    if "chief" in spec:
        return resolver.task_type == "chief"
    return resolver.task_type == "worker" and resolver.task_id == 0


@contextlib.contextmanager
def write_dir(strategy, output_dir):
    """Where this process writes what every worker writes but only the chief keeps (records,
    checkpoints, exports; writing them takes collectives all must join): `output_dir` on the
    chief, elsewhere a temporary directory, removed with all it holds on leaving."""
    if is_chief(strategy):
        yield output_dir
        return
    with tempfile.TemporaryDirectory(prefix="worker_") as directory:
        yield directory


def has_several_workers(strategy):
    """Whether the strategy spans processes (a cluster in TF_CONFIG): they must then run the
    same collectives in the same order, so nothing they do may depend on their own clocks."""
    resolver = getattr(strategy, "cluster_resolver", None)
    spec = resolver.cluster_spec().as_dict() if resolver is not None else {}
    return sum(len(tasks) for tasks in spec.values()) > 1


BFLOAT16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")  # what oneDNN's bfloat16 matmuls run on


def cpu_lacks_bfloat16(cpuinfo="/proc/cpuinfo"):
    """True when `cpuinfo` lists the CPU's flags and none is a bfloat16 instruction set.

    Without them oneDNN emulates bfloat16 matmuls in float32 with conversions, so mixed
    bfloat16 trains slower than float32 there (docs/performance.md). False when it cannot tell
    (no such file, no flags).
    """
    try:
        with open(cpuinfo) as f:
            flag_lines = [line for line in f if line.startswith("flags")]
    except OSError:
        return False
    flags = {flag for line in flag_lines for flag in line.split(":", 1)[-1].split()}
    return bool(flags) and not flags.intersection(BFLOAT16_CPU_FLAGS)
