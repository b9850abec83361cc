"""run_multiple_choice.py end to end on invented SWAG-layout files, and its SavedModel in a
process with only TensorFlow and tensorflow-text."""
import csv
import json

import numpy as np
import pytest

from conftest import REFS
from scripts import run_script
from serving import serve

HEADER = ["", "video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source",
          "ending0", "ending1", "ending2", "ending3", "label"]
ROWS = [  # invented
    ("The keeper climbs the stairs.", "He", ["lights the lamp.", "eats the moon.",
                                            "sings to a chair.", "flies away."], 0),
    ("The baker opens the oven.", "She", ["reads the sea.", "takes out the bread.",
                                         "paints the wind.", "swims in flour."], 1),
    ("A storm breaks over the bay.", "The boats", ["dance on the roof.", "eat the rain.",
                                                   "hurry into the harbour.", "sleep."], 2),
    ("The children carry stones, a heavy load.", "They", ["fly.", "melt.", "sing to fish.",
                                                         "build a wall by the river."], 3),
]


def write_swag(directory, copies=4):
    directory.mkdir(parents=True, exist_ok=True)
    for name, count, labelled in (("train", copies, True), ("val", 1, True),
                                  ("test", 1, False)):
        with open(directory / f"{name}.csv", "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(HEADER if labelled else HEADER[:-1])
            for index, (sent1, sent2, endings, label) in enumerate(ROWS * count):
                row = [index, "v", "0", f"{sent1} {sent2}", sent1, sent2, "gold", *endings]
                writer.writerow(row + [label] if labelled else row)
    return directory


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    if not REFS.exists():
        pytest.skip(f"{REFS} is absent: the reference data lives in ../shared beside the project")
    root = tmp_path_factory.mktemp("swag")
    (root / "config.json").write_text(json.dumps({
        "vocab_size": 30522, "hidden_size": 16, "num_hidden_layers": 2,
        "num_attention_heads": 2, "intermediate_size": 24, "max_position_embeddings": 64,
        "type_vocab_size": 2}))
    data = write_swag(root / "data")
    process = run_script(
        "run_multiple_choice.py", f"--data_dir={data}", f"--bert_config_file={root / 'config.json'}",
        f"--vocab_file={REFS / 'vocab/uncased_vocab.txt'}", f"--output_dir={root / 'out'}",
        "--max_seq_length=24", "--train_batch_size=4", "--eval_batch_size=3",
        "--predict_batch_size=3", "--learning_rate=1e-3", "--num_train_epochs=3",
        "--save_checkpoints_steps=5", "--iterations_per_loop=4", "--do_train", "--do_eval",
        "--do_predict", f"--export_dir={root / 'serving'}")
    return root, process


def test_outputs(trained):
    root, process = trained
    results = dict(line.split(" = ") for line in
                   (root / "out/eval_results.txt").read_text().splitlines())
    assert set(results) == {"eval_accuracy", "eval_loss", "global_step"}
    assert int(results["global_step"]) == int(16 / 4 * 3)
    assert float(results["eval_accuracy"]) * 4 == pytest.approx(
        round(float(results["eval_accuracy"]) * 4))
    lines = (root / "out/test_results.tsv").read_text().splitlines()
    assert [line.split("\t")[0] for line in lines] == ["0", "1", "2", "3"]
    probabilities = np.array([[float(v) for v in line.split("\t")[1:]] for line in lines])
    assert probabilities.shape == (4, 4)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1, atol=1e-6)
    assert "step 12/12" in process.stderr
    assert (f"Eval: eval_accuracy {float(results['eval_accuracy']):.4f} (always guessing the "
            f"most frequent answer, 0: 0.2500, or one of 4 at random: 0.2500)") in process.stderr


def test_savedmodel_in_a_tensorflow_only_process_equals_do_predict(trained):
    """Through tf.saved_model.load and a session fed and fetched by tensor name (TF Serving's
    way), in a process that imports only tensorflow and tensorflow_text."""
    root, _ = trained
    version = next(p for p in (root / "serving").iterdir() if p.name.isdigit())
    (served,) = serve(version, [("serving_default", {
        "context": [r[0] for r in ROWS],
        "endings": [[r[1] + " " + e for e in r[2]] for r in ROWS]})])
    expected = [[float(v) for v in line.split("\t")[1:]]
                for line in (root / "out/test_results.tsv").read_text().splitlines()]
    for loader in ("session", "object_loader"):
        np.testing.assert_allclose(served[loader]["probabilities"], expected, atol=1e-5, rtol=0)
        assert served[loader]["label_ids"] == np.argmax(expected, axis=1).tolist()
