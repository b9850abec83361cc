"""Picks the `tf.distribute` strategy the TPUEstimator scripts' flags describe."""
import tensorflow as tf

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
