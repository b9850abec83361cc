import collections
import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling import BertConfig, BertPretrainer
from modeling.checkpoints import name_based
from modeling.training import optimization, trainer


def test_schedule_warms_up_then_decays_from_step_zero():
    schedule = optimization.WarmupPolynomialDecay(1e-4, num_train_steps=100, num_warmup_steps=10)
    lrs = [float(schedule(step)) for step in (0, 5, 9, 10, 50, 100, 150)]
    # Decay from step 0: at step 10 it is already 1e-4·(1 - 10/100), not 1e-4.
    np.testing.assert_allclose(lrs, [0, 5e-5, 9e-5, 9e-5, 5e-5, 0, 0], rtol=1e-6, atol=1e-12)
    no_warmup = optimization.WarmupPolynomialDecay(2e-5, 1000, 0)
    np.testing.assert_allclose(float(no_warmup(0)), 2e-5, rtol=1e-7)


def test_weight_decay_skips_layer_norm_and_biases_by_full_path(tiny_config):
    model = BertPretrainer(tiny_config)
    optimizer = optimization.create_optimizer(1e-4, 10, 1)
    optimizer.build(model.trainable_variables)
    decays = {v.path: d for v, d in zip(model.trainable_variables, optimizer.decays)}
    assert decays["bert/embeddings/word_embeddings"]
    assert decays["bert/encoder/layer_1/attention/self/query/kernel"]
    assert decays["cls/seq_relationship/output_weights"]
    # Leaf names `gamma`/`beta` match nothing: only the full path says LayerNorm.
    assert not decays["bert/embeddings/LayerNorm/gamma"]
    assert not decays["cls/predictions/transform/LayerNorm/beta"]
    assert not decays["cls/predictions/output_bias"]
    assert not decays["bert/pooler/dense/bias"]
    assert optimizer.epsilon == 1e-6 and optimizer.weight_decay_rate == 0.01


def test_clipping_uses_the_norm_of_the_summed_gradient():
    # Two lookups of row 1: the true gradient row is [2, 2], norm sqrt(8), not sqrt(4).
    sparse = tf.IndexedSlices(tf.ones([2, 2]), tf.constant([1, 1]), tf.constant([3, 2]))
    clipped, norm = optimization.clip_gradients([sparse, tf.zeros([2])])
    np.testing.assert_allclose(norm, np.sqrt(8.0), rtol=1e-6)
    np.testing.assert_allclose(clipped[0], [[0, 0], [2 / np.sqrt(8)] * 2, [0, 0]], rtol=1e-6)


def test_the_update_applies_the_clipping_scale_as_clip_by_global_norm_would():
    """The trainer hands the update the clipping's factor (one pass over the gradients fewer):
    the same weights and slots as updating with the clipped gradients, for a matrix and a
    bias-sized vector."""
    rng = np.random.default_rng(5)
    shapes = [(300, 300), (7,)]
    gradients = [tf.constant(rng.normal(size=shape) * 3, tf.float32) for shape in shapes]
    scale, norm = optimization.clip_scale(gradients)
    clipped, clipped_norm = tf.clip_by_global_norm(gradients, optimization.CLIP_NORM)
    assert float(norm) == float(clipped_norm) and float(norm) > 1  # clipping is active
    results = []
    for folded in (False, True):
        variables = [keras.Variable(np.full(shape, 0.5, "float32")) for shape in shapes]
        optimizer = optimization.create_optimizer(1e-3, num_train_steps=10, num_warmup_steps=0)
        optimizer.build(variables)
        for _ in range(2):
            if folded:
                optimizer.apply_scaled_gradients(zip(gradients, variables), scale)
            else:
                optimizer.apply_gradients(zip(clipped, variables))
        results.append([v.numpy() for v in variables + optimizer.adam_m + optimizer.adam_v])
    for explicit, folded in zip(*results):
        np.testing.assert_allclose(folded, explicit, rtol=1e-7, atol=0)
    assert not np.allclose(results[0][0], 0.5)  # the variables moved


def _train_five_steps(refs):
    directory = refs / "optimizer"
    model = BertPretrainer(BertConfig.from_json_file(directory / "bert_config_nodropout.json"))
    name_based.load_original(model, str(refs / "model/bert_model.ckpt"))
    batch = dict(np.load(directory / "batch.npz"))
    batch["token_type_ids"] = batch.pop("segment_ids")
    optimizer = optimization.create_optimizer(1e-4, num_train_steps=100, num_warmup_steps=10)

    @tf.function
    def train_step(batch):
        with tf.GradientTape() as tape:
            outputs = model(batch, training=True)
        gradients = tape.gradient(outputs["total_loss"], model.trainable_variables)
        learning_rate = optimizer.learning_rate  # read before apply increments the step
        # Clipped as the trainer clips: the update applies the factor.
        dense = [tf.convert_to_tensor(g) for g in gradients]
        scale, norm = optimization.clip_scale(dense)
        optimizer.apply_scaled_gradients(zip(dense, model.trainable_variables), scale)
        return outputs["total_loss"], outputs["masked_lm_loss"], norm, learning_rate

    log = [[float(x) for x in train_step(batch)] for _ in range(5)]
    return model, optimizer, np.array(log), batch


@pytest.fixture(scope="module")
def five_steps():
    from conftest import REFS
    if not REFS.exists():
        pytest.skip(f"{REFS} is absent: the reference data lives in ../shared beside the project")
    return REFS, _train_five_steps(REFS)


def test_five_steps_give_the_recorded_losses_and_learning_rates(five_steps):
    refs, (model, optimizer, log, batch) = five_steps
    recorded = np.load(refs / "optimizer/losses.npz")
    np.testing.assert_allclose(log[:, 0], recorded["total_loss"], rtol=1e-5, atol=0)
    np.testing.assert_allclose(log[:, 1], recorded["mlm_loss"], rtol=1e-5, atol=0)
    np.testing.assert_array_equal(log[:, 3].astype(np.float32), recorded["learning_rate"])
    steps = json.loads((refs / "optimizer/train_log.json").read_text())["steps"]
    norms = [step["grad_global_norm_before_clip"] for step in steps]
    np.testing.assert_allclose(log[:, 2], norms, rtol=1e-5)  # above 1: clipping is active
    after = model(batch)
    np.testing.assert_allclose(float(after["total_loss"]), 10.804122924804688, rtol=1e-5)
    assert int(optimizer.iterations) == 5


def test_five_steps_give_the_recorded_weights(five_steps):
    refs, (model, _, _, _) = five_steps
    reader = tf.train.load_checkpoint(str(refs / "optimizer/bert_model_step5.ckpt"))
    assert reader.get_tensor("global_step") == 5
    for variable in model.weights:
        np.testing.assert_allclose(variable.numpy(), reader.get_tensor(variable.path),
                                   atol=1e-6, rtol=0, err_msg=variable.path)


def test_five_steps_give_the_recorded_adam_slots(five_steps):
    refs, (model, optimizer, _, _) = five_steps
    slots = np.load(refs / "optimizer/adam_slots.npz")
    # m holds gradients (values up to 0.05), v their squares (up to 7e-5).
    tolerance = {"adam_m": 1e-7, "adam_v": 1e-10}
    for variable, m, v in zip(model.trainable_variables, optimizer.adam_m, optimizer.adam_v):
        for slot, value in (("adam_m", m.numpy()), ("adam_v", v.numpy())):
            key = f"{variable.path.replace('/', '__')}__{slot}"
            if key in slots:
                np.testing.assert_allclose(value, slots[key], atol=tolerance[slot], rtol=0,
                                           err_msg=key)
                continue
            rows = slots[f"{key}__rowidx"]
            np.testing.assert_allclose(value[rows], slots[f"{key}__rows"],
                                       atol=tolerance[slot], rtol=0, err_msg=key)
            wide = value.astype(np.float64)
            np.testing.assert_allclose(np.sum(wide ** 2), slots[f"{key}__sumsq"], rtol=1e-4)
            np.testing.assert_allclose(np.max(np.abs(wide)), slots[f"{key}__maxabs"], rtol=1e-4)
            np.testing.assert_allclose(np.sum(wide), slots[f"{key}__sum"],
                                       atol=tolerance[slot] * 10, rtol=0)


def test_lamb_scales_each_step_by_the_trust_ratio():
    weight = tf.Variable([[3.0, 4.0]])  # norm 5
    bias = tf.Variable([1.0, -1.0])
    weight.path, bias.path = "w/kernel", "w/bias"  # what Keras variables carry
    optimizer = optimization.Lamb(learning_rate=0.1)
    optimizer.build([weight, bias])
    gradient = np.array([[0.3, -0.1]], np.float32)
    optimizer.apply_gradients([(tf.constant(gradient), weight),
                               (tf.constant([0.2, 0.2]), bias)])
    # Bias-corrected first step: m̂ = g, v̂ = g², so the Adam update is sign(g) (ε aside).
    update = gradient / (np.abs(gradient) + 1e-6) + 0.01 * np.array([[3.0, 4.0]])
    ratio = 5.0 / np.linalg.norm(update)
    np.testing.assert_allclose(weight.numpy(), [[3.0, 4.0]] - 0.1 * ratio * update, rtol=1e-5)
    # Excluded from decay: no decay and no trust ratio, a plain bias-corrected Adam step.
    np.testing.assert_allclose(bias.numpy(), [1.0 - 0.1, -1.0 - 0.1], rtol=1e-5)



def _ancestors(operation):
    """Names of every operation `operation` waits for, through data and control inputs."""
    seen, stack = set(), [operation]
    while stack:
        current = stack.pop()
        for parent in [t.op for t in current.inputs] + list(current.control_inputs):
            if parent.name not in seen:
                seen.add(parent.name)
                stack.append(parent)
    return seen


def _traced_update(optimizer_class, shapes):
    """Variables of `shapes` (all 2.0), their optimizer (lr 0.1), gradients (all 0.5), and a
    compiled update with its traced graph."""
    variables = [keras.Variable(np.full(shape, 2.0, np.float32), name=f"w{i}")
                 for i, shape in enumerate(shapes)]
    optimizer = optimizer_class(learning_rate=0.1)
    optimizer.build(variables)
    gradients = [tf.fill(v.shape, 0.5) for v in variables]

    @tf.function
    def update(gradients):
        optimizer.apply_gradients(zip(gradients, variables))

    graph = update.get_concrete_function(gradients).graph
    return optimizer, variables, gradients, update, graph


def _compiled_calls(graph):
    return [op for op in graph.get_operations()
            if op.type in ("PartitionedCall", "StatefulPartitionedCall")
            and op.node_def.attr["_XlaMustCompile"].b]


def _assigned(call):
    """Names of the variables a compiled call assigns (its graph's AssignVariableOp inputs)."""
    function = call.graph._functions[call.node_def.attr["f"].func.name]
    handles = {id(inner): outer for outer, inner in zip(call.inputs, function.graph.inputs)}
    return {handles[id(op.inputs[0])].name for op in function.graph.get_operations()
            if op.type == "AssignVariableOp"}


@pytest.mark.parametrize("optimizer_class", [optimization.AdamWeightDecay, optimization.Lamb])
def test_compiled_updates_run_one_after_another(optimizer_class):
    """Each compiled update waits for the previous one, so the executor never holds several
    variables' temporaries at once (240 MB of peak memory on MiniLM). Another trace does not
    wait for operations of the first one's graph."""
    shapes = [(4, 3), (70_000,), (3,), (300, 2)]
    optimizer, variables, gradients, update, graph = _traced_update(optimizer_class, shapes)
    calls = _compiled_calls(graph)
    assert len(calls) == 4  # one a variable
    for previous, call in zip(calls, calls[1:]):
        assert previous.name in _ancestors(call)
    update(gradients)
    tf.function(lambda g: optimizer.apply_gradients(zip(g, variables)))(gradients)
    assert optimizer.iterations.numpy() == 2


@pytest.mark.parametrize("optimizer_class", [optimization.AdamWeightDecay, optimization.Lamb])
def test_updates_are_compiled_calls_that_assign_in_place(optimizer_class):
    """The formula's element-wise operations are fused by XLA, not run one by one: each
    variable's weights and slots are computed and assigned inside a call XLA must compile (it
    aliases what it assigns: no new buffer a step), all but the first by one trace that leaves
    the shape open; nothing outside such calls computes on the variables or assigns them."""
    shapes = [(1027, 64), (5,), (70_007,), (7, 4), (5,), (1027, 64)]
    optimizer, variables, gradients, update, graph = _traced_update(optimizer_class, shapes)
    calls = _compiled_calls(graph)
    assert [len(_assigned(call)) for call in calls] == [3] * len(shapes)
    traced = [call.node_def.attr["f"].func.name for call in calls]
    assert len(set(traced)) == 2  # the first shape's, then one for any shape
    elementwise = {"Mul", "AddV2", "Sub", "RealDiv", "Sqrt", "Square", "Pow"}
    assert not [op for op in graph.get_operations()
                if op.type in elementwise and op.outputs[0].shape.num_elements() != 1]
    assert not [op for op in graph.get_operations()  # the step count is assigned outside
                if op.type == "AssignVariableOp" and op.inputs[1].shape.num_elements() != 1]
    update(gradients)
    first_m = 0.1 * 0.5
    if optimizer_class is optimization.AdamWeightDecay:  # no bias correction
        expected = 2.0 - 0.1 * (first_m / (np.sqrt(0.001 * 0.25) + 1e-6) + 0.01 * 2.0)
        for variable, m in zip(variables, optimizer.adam_m):
            np.testing.assert_allclose(variable.numpy(), np.full(variable.shape, expected),
                                       rtol=1e-6)
            np.testing.assert_allclose(m.numpy(), np.full(variable.shape, first_m), rtol=1e-6)


def test_a_gathers_rows_update_as_its_dense_gradient_without_sparse_variable_operations():
    """`IndexedSlices` of distinct rows (`trainer.summed_rows`) update weights and slots as
    their dense gradient does, also where a step is skipped; the rows are read and written
    inside compiled passes, never by TensorFlow's sparse variable operations, which would
    turn the variable to copy-on-read (every later read of it a copy)."""
    shape = (1027, 64)
    rng = np.random.default_rng(5)
    looked_up = rng.integers(0, shape[0], 300).astype(np.int32)  # with repeats
    values = rng.normal(size=(300, shape[1])).astype(np.float32)
    results = {}
    for form in ("dense", "rows"):
        variable = keras.Variable(np.full(shape, 2.0, np.float32), name="word_embeddings")
        optimizer = optimization.AdamWeightDecay(learning_rate=0.1)
        optimizer.build([variable])

        @tf.function
        def update(indices, values, condition):
            gathered = tf.IndexedSlices(values, indices, tf.constant(shape, tf.int64))
            gradient = (trainer.summed_rows(gathered) if form == "rows"
                        else tf.convert_to_tensor(gathered))
            optimizer.apply_scaled_gradients([(gradient, variable)], tf.constant(0.7),
                                             condition)

        for step, condition in enumerate([True, False, True]):
            update(looked_up[step * 50:], values[step * 50:], tf.constant(condition))
        graph = update.get_concrete_function(looked_up, values, tf.constant(True)).graph
        operations = {op.type for op in graph.get_operations()}
        assert not operations & {"ResourceGather", "ResourceScatterUpdate"}, form
        results[form] = [variable.numpy(), optimizer.adam_m[0].numpy(),
                         optimizer.adam_v[0].numpy()]
    untouched = np.setdiff1d(np.arange(shape[0]), looked_up)
    assert untouched.size and not results["rows"][1][untouched].any()  # m of a zero gradient
    for name, dense, rows in zip(("weights", "m", "v"), results["dense"], results["rows"]):
        np.testing.assert_allclose(rows, dense, rtol=1e-6, atol=1e-12, err_msg=name)
