"""modeling/training/distribution.py: the strategy the flags name, and who the chief is."""
import types

import pytest
import tensorflow as tf

from modeling.training import distribution


def test_strategies_by_name():
    assert isinstance(distribution.get_strategy("one_device"), tf.distribute.OneDeviceStrategy)
    mirrored = distribution.get_strategy("mirrored")
    assert isinstance(mirrored, tf.distribute.MirroredStrategy)
    assert mirrored.num_replicas_in_sync == len(tf.config.list_logical_devices("GPU")
                                                or tf.config.list_logical_devices("CPU"))
    with pytest.raises(ValueError, match=r"Unknown distribution strategy 'gpu'; expected one "
                                         r"of \('one_device'"):
        distribution.get_strategy("gpu")
    with pytest.raises(ValueError, match="needs --tpu_name or --master"):
        distribution.get_strategy("tpu")


def _strategy(spec, task_type, task_id=0):
    resolver = types.SimpleNamespace(cluster_spec=lambda: tf.train.ClusterSpec(spec),
                                     task_type=task_type, task_id=task_id)
    return types.SimpleNamespace(cluster_resolver=resolver)


@pytest.mark.parametrize("spec, task_type, task_id, chief", [
    ({"chief": ["a:1"], "worker": ["b:1", "c:1"]}, "chief", 0, True),
    ({"chief": ["a:1"], "worker": ["b:1", "c:1"]}, "worker", 0, False),
    ({"worker": ["b:1", "c:1"]}, "worker", 0, True),
    ({"worker": ["b:1", "c:1"]}, "worker", 1, False),
    ({}, None, 0, True),
])
def test_the_chief_is_the_chief_task_else_worker_0(spec, task_type, task_id, chief):
    assert distribution.is_chief(_strategy(spec, task_type, task_id)) is chief
    assert distribution.is_chief(tf.distribute.get_strategy())  # no cluster: the only process
