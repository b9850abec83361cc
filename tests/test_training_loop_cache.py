"""The training loop kept across runs: a later run of the same key loads it instead of tracing,
and trains bit for bit as a traced loop; another setting or code is another key; a damaged entry
is traced anew."""
import importlib
import pathlib
import sys

import numpy as np
import pytest
import tensorflow as tf

from modeling.tasks import pretraining
from modeling.training import distribution, loop_cache, trainer


def _batches(config, count=4, size=4, seq=7, predictions=3):
    rng = np.random.default_rng(5)
    return tf.data.Dataset.from_tensor_slices({
        "input_ids": rng.integers(1, config.vocab_size, (count, size, seq)).astype("int32"),
        "input_mask": np.ones((count, size, seq), "int32"),
        "token_type_ids": np.zeros((count, size, seq), "int32"),
        "masked_lm_positions": rng.integers(1, seq, (count, size, predictions)).astype("int32"),
        "masked_lm_ids": rng.integers(0, config.vocab_size,
                                      (count, size, predictions)).astype("int32"),
        "masked_lm_weights": np.ones((count, size, predictions), "float32"),
        "next_sentence_labels": rng.integers(0, 2, (count, size, 1)).astype("int32"),
    })


def _pretrainer(config, cache, objective=pretraining.MaskedLMNextSentenceObjective,
                learning_rate=1e-3, seed=7, **options):
    return trainer.Trainer(objective(), distribution.get_strategy("one_device"), config,
                           learning_rate, 100, 2, seed=seed, loop_cache_dir=cache and str(cache),
                           **options)


def _run(pretrainer, config, loops=2, steps=2):
    """Losses of `loops` loops of `steps` steps, and the weights and Adam slots after them."""
    iterator = distribution.per_replica_batches(pretrainer.strategy,
                                                _batches(config).repeat())
    losses = [float(pretrainer._train_loop(iterator, tf.constant(steps))["loss"])
              for _ in range(loops)]
    return losses, [v.numpy() for v in pretrainer.loop_variables()]


def _entries(cache):
    return sorted(path.name for path in pathlib.Path(cache).iterdir()
                  if not path.name.startswith("."))


def test_a_later_run_loads_the_kept_loop_and_trains_bit_for_bit_as_traced(tiny_config,
                                                                            tmp_path, caplog):
    traced = _run(_pretrainer(tiny_config, None), tiny_config)
    first = _pretrainer(tiny_config, tmp_path)
    kept = _run(first, tiny_config)
    assert len(_entries(tmp_path)) == 1
    later = _pretrainer(tiny_config, tmp_path)
    with caplog.at_level("INFO", logger="absl"):
        loaded = _run(later, tiny_config)
    assert loop_cache.LOADED in caplog.text
    assert later._traced_train_loop.experimental_get_tracing_count() == 0
    assert _entries(tmp_path) == _entries(tmp_path)[:1]
    for result in (kept, loaded):
        assert result[0] == traced[0]
        for ours, theirs in zip(result[1], traced[1]):
            np.testing.assert_array_equal(ours, theirs)
    assert later.global_step == 4


def test_a_run_of_another_seed_loads_the_loop_and_draws_its_own_weights_and_masks(tiny_config,
                                                                                  tmp_path):
    _run(_pretrainer(tiny_config, tmp_path), tiny_config, loops=1)
    traced = _run(_pretrainer(tiny_config, None, seed=8), tiny_config)
    later = _pretrainer(tiny_config, tmp_path, seed=8)
    loaded = _run(later, tiny_config)
    assert later._traced_train_loop.experimental_get_tracing_count() == 0
    assert loaded[0] == traced[0]
    for ours, theirs in zip(loaded[1], traced[1]):
        np.testing.assert_array_equal(ours, theirs)


def test_another_setting_or_precision_is_another_entry(tiny_config, tmp_path):
    _run(_pretrainer(tiny_config, tmp_path), tiny_config, loops=1)
    _run(_pretrainer(tiny_config, tmp_path, learning_rate=2e-3), tiny_config, loops=1)
    _run(_pretrainer(tiny_config, tmp_path, num_accumulation_steps=2), tiny_config, loops=1)
    _run(_pretrainer(tiny_config, tmp_path, objective=pretraining.MaskedLMObjective),
         tiny_config, loops=1)
    trainer.set_precision("mixed_bfloat16")
    try:
        _run(_pretrainer(tiny_config, tmp_path), tiny_config, loops=1)
    finally:
        trainer.set_precision("float32")
    dropout = tiny_config.__class__(**dict(vars(tiny_config), hidden_dropout_prob=0.3))
    _run(_pretrainer(dropout, tmp_path), dropout, loops=1)
    assert len(_entries(tmp_path)) == 6
    _run(_pretrainer(tiny_config, tmp_path, learning_rate=2e-3), tiny_config, loops=1)
    assert len(_entries(tmp_path)) == 6


def test_an_objective_of_other_code_is_another_key(tiny_config, tmp_path, monkeypatch):
    module = tmp_path / "my_objective.py"
    monkeypatch.syspath_prepend(str(tmp_path))
    keys = []
    for scale in ("1.0", "2.0"):
        module.write_text(
            "from modeling.tasks import pretraining\n"
            "class Mine(pretraining.MaskedLMObjective):\n"
            "    def replica_loss(self, outputs, batch, *counts):\n"
            "        loss, metrics = super().replica_loss(outputs, batch, *counts)\n"
            f"        return loss * {scale}, metrics\n")
        sys.modules.pop("my_objective", None)
        mine = importlib.import_module("my_objective").Mine
        pretrainer = _pretrainer(tiny_config, tmp_path / "cache", objective=mine)
        iterator = distribution.per_replica_batches(pretrainer.strategy, _batches(tiny_config))
        keys.append(loop_cache.key(pretrainer, iterator))
    assert keys[0] != keys[1]


@pytest.mark.parametrize("damage", ["truncated", "entry"])
def test_a_damaged_entry_is_traced_anew_with_a_warning(tiny_config, tmp_path, caplog, damage):
    kept = _run(_pretrainer(tiny_config, tmp_path), tiny_config)
    (entry,) = _entries(tmp_path)
    path = tmp_path / entry / (loop_cache.LIBRARY if damage == "truncated" else loop_cache.ENTRY)
    path.write_bytes(path.read_bytes()[:len(path.read_bytes()) // 2])
    later = _pretrainer(tiny_config, tmp_path)
    with caplog.at_level("INFO", logger="absl"):
        again = _run(later, tiny_config)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and str(tmp_path / entry) in warnings[0], warnings
    assert loop_cache.LOADED not in caplog.text
    assert later._traced_train_loop.experimental_get_tracing_count() == 1
    assert again[0] == kept[0]
    assert _entries(tmp_path) == [entry]  # kept anew, whole
    assert loop_cache.LOADED in _loaded_log(tiny_config, tmp_path, caplog)


def _loaded_log(config, cache, caplog):
    caplog.clear()
    with caplog.at_level("INFO", logger="absl"):
        _run(_pretrainer(config, cache), config, loops=1)
    return caplog.text


def test_a_renamed_function_is_renamed_wherever_it_is_called():
    library = tf.compat.v1.GraphDef().library
    outer, inner = library.function.add(), library.function.add()
    outer.signature.name, inner.signature.name = "outer_1", "inner_1"
    call = outer.node_def.add(name="call", op="StatefulPartitionedCall")
    call.attr["f"].func.name = "inner_1"
    loop = outer.node_def.add(name="loop", op="While")
    loop.attr["body"].func.name = "inner_1"
    loop.attr["branches"].list.func.add(name="inner_1")
    direct = outer.node_def.add(name="direct", op="inner_1")
    other = outer.node_def.add(name="other", op="StatefulPartitionedCall")
    other.attr["f"].func.name = "registered_elsewhere"
    loop_cache._rename_functions(library, "_k")
    assert [f.signature.name for f in library.function] == ["outer_1_k", "inner_1_k"]
    assert call.attr["f"].func.name == loop.attr["body"].func.name == "inner_1_k"
    assert loop.attr["branches"].list.func[0].name == "inner_1_k" and direct.op == "inner_1_k"
    assert other.attr["f"].func.name == "registered_elsewhere"
