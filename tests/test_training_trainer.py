"""The training step and loop on the CPU with a tiny model: float16 loss scaling, gradient
accumulation's memory, progress, divergence, checkpoints and resuming."""
import json
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from modeling.training import distribution
from modeling.tasks import pretraining
from modeling.training import trainer
from scripts import script_env


def _batch(config, size=4, seq=7, predictions=3):
    rng = np.random.default_rng(0)
    return {
        "input_ids": rng.integers(1, config.vocab_size, (size, seq)).astype("int32"),
        "input_mask": np.ones((size, seq), "int32"),
        "token_type_ids": np.zeros((size, seq), "int32"),
        "masked_lm_positions": rng.integers(1, seq, (size, predictions)).astype("int32"),
        "masked_lm_ids": rng.integers(0, config.vocab_size, (size, predictions)).astype("int32"),
        "masked_lm_weights": np.ones((size, predictions), "float32"),
        "next_sentence_labels": rng.integers(0, 2, (size, 1)).astype("int32"),
    }


def test_float16_overflow_skips_the_step_and_halves_the_scale(tiny_config):
    trainer.set_precision("mixed_float16")
    try:
        pretrainer = _pretrainer(tiny_config)
    finally:
        trainer.set_precision("float32")
    assert pretrainer.model.compute_dtype == "float16" and pretrainer.loss_scale is not None
    dataset = tf.data.Dataset.from_tensors(_batch(tiny_config)).repeat()
    iterator = distribution.per_replica_batches(pretrainer.strategy, dataset)
    before = [v.numpy() for v in pretrainer.model.trainable_variables]

    pretrainer.loss_scale.scale.assign(2.0 ** 127)  # loss × scale overflows float32
    pretrainer._train_loop(iterator, tf.constant(1))
    assert pretrainer.global_step == 0
    assert float(pretrainer.loss_scale.scale) == 2.0 ** 126
    for old, variable in zip(before, pretrainer.model.trainable_variables):
        np.testing.assert_array_equal(variable.numpy(), old, err_msg=variable.path)
    assert not np.any(pretrainer.optimizer.adam_m[0].numpy())

    pretrainer.loss_scale.scale.assign(2.0 ** 10)
    losses = [float(pretrainer._train_loop(iterator, tf.constant(1))["loss"])
              for _ in range(20)]
    assert pretrainer.global_step == 20
    assert int(pretrainer.loss_scale.good_steps) == 20
    assert losses[-1] < losses[0] - 0.5, losses


def test_the_loop_runs_without_grappler_on_cpus_and_trains_as_with_it(tiny_config):
    def spied(pretrainer):
        traced = pretrainer._traced_train_loop

        def spy(*args):
            during.append(tf.config.optimizer.get_experimental_options()
                          .get("disable_meta_optimizer"))
            return traced(*args)
        pretrainer._traced_train_loop = spy
        return pretrainer

    during, losses, weights = [], {}, {}
    for on_cpus in (True, False):
        pretrainer = spied(_pretrainer(tiny_config))
        assert pretrainer._on_cpus  # this machine's one device
        pretrainer._on_cpus = on_cpus  # False: as on an accelerator, grappler kept
        iterator = distribution.per_replica_batches(
            pretrainer.strategy, tf.data.Dataset.from_tensors(_batch(tiny_config)).repeat())
        losses[on_cpus] = [float(pretrainer._train_loop(iterator, tf.constant(1))["loss"])
                           for _ in range(3)]
        weights[on_cpus] = [v.numpy() for v in pretrainer.model.trainable_variables]
        assert not tf.config.optimizer.get_experimental_options().get("disable_meta_optimizer")
    assert during == [True] * 3 + [False] * 3
    np.testing.assert_allclose(losses[True], losses[False], rtol=1e-6)
    for without, with_grappler in zip(weights[True], weights[False]):
        np.testing.assert_allclose(without, with_grappler, rtol=1e-5, atol=1e-7)


def _pretrainer(config, num_train_steps=100, num_warmup_steps=0, **options):
    """A `Trainer` of the original's pre-training objective."""
    return trainer.Trainer(pretraining.MaskedLMNextSentenceObjective(),
                           distribution.get_strategy("one_device"), config, 1e-3,
                           num_train_steps, num_warmup_steps, **options)


def _train(pretrainer, directory, steps, iterations_per_loop=2, save_checkpoints_steps=2):
    dataset_fn = lambda skip: tf.data.Dataset.from_tensors(_batch(pretrainer.model.config)).repeat()
    return pretrainer.train(dataset_fn, 4, str(directory), steps, iterations_per_loop,
                            save_checkpoints_steps)


def step_peaks(micro_batch_counts):
    """{count: bytes a training step allocates at its peak beyond what was live before it},
    for a batch of 32 x 128 cut into each count of micro-batches."""
    from modeling import BertConfig
    config = BertConfig(vocab_size=99, hidden_size=64, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=37,
                        max_position_embeddings=128, type_vocab_size=3)
    batch = _batch(config, size=32, seq=128)
    peaks = {}
    for count in micro_batch_counts:
        pretrainer = _pretrainer(config, num_accumulation_steps=count)
        iterator = distribution.per_replica_batches(
            pretrainer.strategy, tf.data.Dataset.from_tensors(batch).repeat())
        pretrainer._train_loop(iterator, tf.constant(1))  # traced, compiled, slots made
        tf.config.experimental.reset_memory_stats("CPU:0")
        before = tf.config.experimental.get_memory_info("CPU:0")["current"]
        pretrainer._train_loop(iterator, tf.constant(1))
        peaks[count] = tf.config.experimental.get_memory_info("CPU:0")["peak"] - before
    return peaks


def test_accumulated_micro_batches_hold_one_micro_batch_of_activations_at_a_time():
    """What --num_accumulation_steps is for: a step's peak memory falls with the micro-batch.
    tf.while_loop runs up to 10 independent iterations at once unless told otherwise, which
    kept several micro-batches' activations alive together (4 micro-batches then peaked at
    0.82-0.84x the whole batch's step; one at a time, 2 and 4 peak at 0.56x and 0.28x).

    Measured in a process of one inter-op thread: with several, the peak depends on how the
    executor's threads interleave the ops, which another process's load changes. And with
    oneDNN on, as the scripts run (modeling/runtime/cpu_kernels.py): its allocator counts the
    bytes asked for. With oneDNN off (TensorFlow's default on CPUs without AVX-512 VNNI, such as
    AMD's Zen 3) the CPU allocator counts nothing, and the BFC allocator counts whole chunks,
    up to twice a request: 2 micro-batches peaked at 0.72-0.75x the whole batch's step there,
    0.59x with oneDNN's allocator, on the same Zen 3."""
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import test_training_trainer "
            "as t; print(json.dumps(t.step_peaks([1, 2, 4])))")
    process = subprocess.run([sys.executable, "-c", code, str(pathlib.Path(__file__).parent)],
                             capture_output=True, text=True, timeout=600,
                             env=script_env(TF_NUM_INTEROP_THREADS="1",
                                            TF_ENABLE_ONEDNN_OPTS="1"))
    assert process.returncode == 0, process.stderr[-3000:]
    peaks = {int(count): peak
             for count, peak in json.loads(process.stdout.splitlines()[-1]).items()}
    whole = peaks[1]
    for micro_batches in (2, 4):
        # One micro-batch at a time: the activations' share divided by the count, plus the
        # gradients' sum, which the whole batch does not keep.
        accumulated = peaks[micro_batches]
        assert accumulated < whole * (1 / micro_batches + 0.15), (micro_batches, accumulated,
                                                                  whole)


def test_progress_has_its_own_cadence_and_logs_the_rate_in_force(tiny_config, tmp_path, caplog):
    pretrainer = _pretrainer(tiny_config, 6, 3, progress_seconds=1e-9)
    with caplog.at_level("INFO", logger="absl"):
        _train(pretrainer, tmp_path, 6, iterations_per_loop=1000, save_checkpoints_steps=1000)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("step ")]
    assert [line.split(":")[0] for line in lines] == [f"step {s}/6" for s in range(1, 7)]
    rates = [float(re.search(r"learning_rate ([0-9.e-]+)", line).group(1)) for line in lines]
    # Step s (1-based) applies the schedule's rate at s - 1: warm-up 0, 1/3, 2/3, then decay.
    expected = [1e-3 * (s / 3 if s < 3 else 1 - s / 6) for s in range(6)]
    np.testing.assert_allclose(rates, expected, rtol=1e-4, atol=1e-9)
    assert all("elapsed " in line and "ETA " in line for line in lines)
    assert "ETA at the next report" in lines[0]  # compiling is no pace to extrapolate
    assert all(re.search(r"ETA \d+:\d\d$", line) for line in lines[1:])
    assert any("tensorboard --logdir" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_a_damaged_latest_checkpoint_falls_back_to_the_one_before(tiny_config, tmp_path, damage,
                                                                 caplog):
    _train(_pretrainer(tiny_config), tmp_path, 4)  # ckpt-2, ckpt-4
    data = next(tmp_path.glob("ckpt-4.data-*"))
    content = data.read_bytes()
    if damage == "truncate":
        data.write_bytes(content[:len(content) // 2])
    else:
        middle = len(content) // 2
        data.write_bytes(content[:middle] + bytes([content[middle] ^ 0xFF]) + content[middle + 1:])
    resumed = _pretrainer(tiny_config)
    with caplog.at_level("WARNING", logger="absl"):
        assert resumed.restore_latest(str(tmp_path)).endswith("ckpt-2")
    assert resumed.global_step == 2
    assert any("ckpt-4" in record.getMessage() and "damaged" in record.getMessage()
               for record in caplog.records)
    again = _pretrainer(tiny_config)
    assert _train(again, tmp_path, 6) == 6  # resumes from step 2 and trains on


def test_only_damaged_checkpoints_is_one_error_naming_them(tiny_config, tmp_path):
    _train(_pretrainer(tiny_config), tmp_path, 2)
    for data in tmp_path.glob("ckpt-2.data-*"):
        data.write_bytes(b"")
    with pytest.raises(ValueError, match="ckpt-2"):
        _pretrainer(tiny_config).restore_latest(str(tmp_path))


def test_pretraining_eval_reports_its_batches(tiny_config, caplog):
    pretrainer = _pretrainer(tiny_config, progress_seconds=1e-9)
    dataset = tf.data.Dataset.from_tensors(_batch(tiny_config)).repeat(5)
    with caplog.at_level("INFO", logger="absl"):
        pretrainer.objective.evaluate(pretrainer, dataset, max_eval_steps=3)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("eval: ")]
    assert [line.split(",")[0] for line in lines[:3]] == [
        "eval: 1/3 batches", "eval: 2/3 batches", "eval: 3/3 batches"]
    assert re.fullmatch(r"eval: 3 batches in \d+:\d\d, [0-9.]+ batches/s", lines[3])


def _batches_with_a_nan_loss_at(config, step, count=6):
    """`count` batches whose `step`-th (from 1) has a NaN masked-LM weight, so a NaN loss;
    each batch's first input id is its number, to tell which ones a loop took."""
    batches = []
    for number in range(1, count + 1):
        batch = _batch(config)
        batch["input_ids"][0, 0] = number
        if number == step:
            batch["masked_lm_weights"][0, 0] = np.nan
        batches.append(batch)
    return tf.data.Dataset.from_tensor_slices(
        {name: np.stack([b[name] for b in batches]) for name in batches[0]})


def test_a_loop_stops_a_step_after_the_first_non_finite_loss_and_names_it(tiny_config):
    pretrainer = _pretrainer(tiny_config)
    iterator = iter(_batches_with_a_nan_loss_at(tiny_config, 3))
    assert int(pretrainer._train_loop(iterator, tf.constant(1))["diverged_at"]) == 0
    totals = pretrainer._train_loop(iterator, tf.constant(4))
    assert np.isnan(totals["loss"]) and int(totals["diverged_at"]) == 3
    assert next(iterator)["input_ids"][0, 0] == 5  # step 4 ran, the loop's last, step 5, not


def test_a_diverging_run_saves_nothing_after_its_last_finite_checkpoint(tiny_config, tmp_path):
    pretrainer = _pretrainer(tiny_config)
    with pytest.raises(ValueError) as raised:
        pretrainer.train(lambda skip: _batches_with_a_nan_loss_at(tiny_config, 4).skip(skip),
                         4, str(tmp_path), 6, 2, 2)
    assert str(raised.value).startswith(
        "step 4: the loss is nan: the run diverged; stopped before saving it (ckpt-2, the "
        "newest checkpoint, is the last finite one); look at --learning_rate=0.001, ")
    assert "--warmup_proportion" in str(raised.value) and "--precision=float32" in str(raised.value)
    assert sorted(path.name for path in tmp_path.glob("ckpt-*.index")) == ["ckpt-2.index"]
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-2")


def test_weights_gone_non_finite_with_a_finite_loss_are_not_saved(tiny_config, tmp_path):
    pretrainer = _pretrainer(tiny_config)
    # A position beyond the batches' 7: no loss reads it, as an overflowing update of a row
    # that only weight decay moves.
    table = pretrainer.model.bert.embeddings.position_embeddings
    table.assign(tf.tensor_scatter_nd_update(table, [[20]], [np.full([32], np.inf, "float32")]))
    with pytest.raises(ValueError, match=r"^step 2: bert/embeddings/position_embeddings is no "
                                         r"longer finite \(the loss was [0-9.]+\): the run "
                                         r"diverged; stopped before saving it \(no checkpoint "
                                         r"was saved\)"):
        _train(pretrainer, tmp_path, 4)
    assert not list(tmp_path.glob("ckpt-*"))


def test_a_run_resumes_only_with_the_batch_size_its_checkpoints_record(tiny_config, tmp_path):
    _train(_pretrainer(tiny_config), tmp_path, 2)
    dataset_fn = lambda skip: pytest.fail("trained with another batch size")
    with pytest.raises(ValueError, match=rf"^--train_batch_size=8, but {tmp_path / 'ckpt-2'} was "
                                         rf"trained with --train_batch_size=4"):
        _pretrainer(tiny_config).train(dataset_fn, 8, str(tmp_path), 4, 2, 2)
    assert _train(_pretrainer(tiny_config), tmp_path, 4) == 4  # with its own, it goes on


@pytest.mark.parametrize("parts", [1, 2])
def test_a_vocabularys_gradient_as_its_rows_trains_as_the_dense_gradient(tiny_config, parts,
                                                                        monkeypatch):
    """From `ROWS_MIN_ELEMENTS` up a fine-tuning step hands the optimizer a gather's gradient
    as the rows the batch looked up, each once (of both micro-batches together): three steps
    leave the weights and slots where the dense gradient leaves them."""
    from modeling.tasks import classifier
    from modeling.training import optimization
    rng = np.random.default_rng(4)
    batch = {"input_ids": rng.integers(1, 9, (4, 7)).astype("int32"),  # many repeats
             "input_mask": np.ones((4, 7), "int32"),
             "token_type_ids": np.zeros((4, 7), "int32"),
             "label_ids": np.array([0, 1, 1, 0], "int32")}
    traced_rows = []
    assign_new_rows = optimization.AdamWeightDecay._assign_new_rows
    monkeypatch.setattr(optimization.AdamWeightDecay, "_assign_new_rows",
                        lambda self, *args: traced_rows.append(args[0].name)
                        or assign_new_rows(self, *args))
    results = {}
    for form, smallest in (("dense", 1 << 62), ("rows", tiny_config.vocab_size)):
        monkeypatch.setattr(trainer, "ROWS_MIN_ELEMENTS", smallest)
        tuner = trainer.Trainer(classifier.ClassifierTask("unused", "mrpc"),
                                distribution.get_strategy("one_device"), tiny_config, 1e-3,
                                10, 1, parallel_micro_batches=parts)
        iterator = distribution.per_replica_batches(
            tuner.strategy, tf.data.Dataset.from_tensors(batch).repeat())
        tuner._train_loop(iterator, tf.constant(3))
        results[form] = [v.numpy() for v in tuner.model.trainable_variables + [
            slot for slots in (tuner.optimizer.adam_m, tuner.optimizer.adam_v)
            for slot in slots]]
    assert any("word_embeddings" in name for name in traced_rows), traced_rows
    for dense, rows in zip(results["dense"], results["rows"]):
        np.testing.assert_allclose(rows, dense, rtol=1e-5, atol=1e-7)
