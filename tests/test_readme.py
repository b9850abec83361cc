"""The code blocks of README.md and docs/*.md, run as written on what `./run_sample.sh` leaves.

A block runs when the line above its opening fence is `<!-- tested -->`; every python block
must be marked. The blocks run in one directory laid out as a checkout after `./run_sample.sh`:
the scripts, `modeling/` and `sample_data/` linked from this checkout, and `out/sample/`
(vocab.txt, bert_config.json, pretraining/export/ with bert_model.ckpt, its bert_config.json and
vocab.txt) holding a tiny model with the pre-training heads built here, in place of
run_sample.sh's (which takes minutes). The pages run in PAGES order, each page's blocks in its
order; later blocks read what earlier ones wrote (features.jsonl, out/part-*.tfrecord,
bert_base.keras), as for a reader who follows the pages.

Bash blocks run with `bash -euo pipefail` and BERT_BASE_DIR=out/sample/pretraining/export, as
the first shell example exports it; python blocks run in this process, each in a fresh
namespace. A block marked `<!-- tested: slow -->` (the README's real fine-tuning) runs with
its `--num_train_epochs` cut to SLOW_EPOCHS, with `../shared` beside the checkout;
`.ci/docs-slow` runs it as written.
"""
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT
from modeling.runtime import quiet

MARKER = "<!-- tested -->"
SLOW_MARKER = "<!-- tested: slow -->"
BERT_BASE_DIR = "out/sample/pretraining/export"
# The order a reader follows: each page's blocks may read what the pages before it wrote.
PAGES = ["README.md", "docs/python_api.md", "docs/extract_features.md",
         "docs/create_pretraining_data.md", "docs/run_pretraining.md", "docs/checkpoints.md"]
SLOW_EPOCHS = "0.02"
AS_WRITTEN = os.environ.get("BERT_TF2_DOCS_AS_WRITTEN") == "1"


def pages():
    """README.md, the PAGES in order, then every other docs/ page by name."""
    others = sorted(str(path.relative_to(ROOT)) for path in (ROOT / "docs").glob("*.md"))
    return PAGES + [page for page in others if page not in PAGES]


def page_blocks(page):
    """(page:line of the opening fence, language, code, marker) for every fenced block of
    `page`; marker is the comment above the fence, or None."""
    blocks, lines = [], (ROOT / page).read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        match = re.fullmatch(r"\s*```(\w+)", lines[index])
        if not match:
            index += 1
            continue
        start, indent = index, len(lines[index]) - len(lines[index].lstrip())
        index += 1
        while lines[index].strip() != "```":
            index += 1
        code = "\n".join(line[indent:] for line in lines[start + 1:index]) + "\n"
        above = lines[start - 1].strip() if start > 0 else ""
        marker = above if above in (MARKER, SLOW_MARKER) else None
        blocks.append((f"{page}:{start + 1}", match.group(1), code, marker))
        index += 1
    return blocks


BLOCKS = [block for page in pages() for block in page_blocks(page)]
TESTED = [block for block in BLOCKS if block[3] == MARKER]
SLOW = [block for block in BLOCKS if block[3] == SLOW_MARKER]


def test_every_python_block_is_tested_and_the_shell_examples_too():
    untested = [where for where, language, _, marker in BLOCKS
                if language == "python" and marker is None]
    assert untested == [], f"python blocks without {MARKER}: {untested}"
    scripts = {script for _, language, code, _ in TESTED if language == "bash"
               for script in re.findall(r"python (\w+\.py)", code)}
    assert scripts >= {"extract_features.py", "create_pretraining_data.py",
                       "run_pretraining.py", "convert_checkpoint.py"}


def test_every_page_is_linked_from_the_readme():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    missing = [page for page in pages()[1:] if f"]({page})" not in readme]
    assert missing == [], f"docs pages the README does not link: {missing}"


def _write_tiny_sample(sample):
    """A tiny model with the pre-training heads in run_sample.sh's layout under `sample`."""
    from modeling import BertConfig, BertPretrainer
    from modeling.checkpoints import name_based
    from modeling.text import tokenization
    basic = tokenization.BasicTokenizer(do_lower_case=True)
    words = sorted({word for line in (ROOT / "sample_data/sample_text.txt").open(encoding="utf-8")
                    for word in basic.tokenize(line)})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=37,
                        max_position_embeddings=128, type_vocab_size=2)
    export = sample / "pretraining/export"
    export.mkdir(parents=True)
    for folder in (sample, export):
        (folder / "vocab.txt").write_text("".join(f"{token}\n" for token in vocab))
        (folder / "bert_config.json").write_text(config.to_json_string())
    name_based.save_original(BertPretrainer(config), str(export / "bert_model.ckpt"),
                             global_step=300)


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    root = tmp_path_factory.mktemp("checkout")
    for path in ROOT.glob("*.py"):
        (root / path.name).symlink_to(path)
    for name in ("modeling", "sample_data"):
        (root / name).symlink_to(ROOT / name)
    _write_tiny_sample(root / "out/sample")
    shared = ROOT.parent / "shared"
    if shared.is_dir() and not (root.parent / "shared").exists():
        (root.parent / "shared").symlink_to(shared)
    return root


def _run_block(checkout, where, language, code, monkeypatch):
    if language == "python":
        monkeypatch.chdir(checkout)
        exec(compile(code, where, "exec"), {"__name__": "__main__"})
        return
    assert language == "bash", language
    env = dict(os.environ, BERT_BASE_DIR=BERT_BASE_DIR,
               PATH=os.pathsep.join([os.path.dirname(sys.executable), os.environ["PATH"]]))
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)  # as a user's shell has it
    process = subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=checkout, env=env,
                             capture_output=True, text=True, timeout=1800)
    assert process.returncode == 0, f"{where} failed:\n{process.stderr[-3000:]}"
    noise = [text for text in process.stderr.splitlines() if quiet.is_noise(text)]
    assert noise == [], noise


@pytest.mark.parametrize("where, language, code", [block[:3] for block in TESTED],
                         ids=[f"{block[0]}-{block[1]}" for block in TESTED])
def test_block_runs_as_written(checkout, where, language, code, monkeypatch):
    _run_block(checkout, where, language, code, monkeypatch)


@pytest.mark.parametrize("where, language, code", [block[:3] for block in SLOW],
                         ids=[f"{block[0]}-{block[1]}" for block in SLOW])
def test_slow_block_runs(checkout, where, language, code, monkeypatch):
    if not (ROOT.parent / "shared").is_dir():
        pytest.skip("needs ../shared beside the checkout (its GLUE data)")
    if not AS_WRITTEN:
        assert "--num_train_epochs=" in code, where
        code = re.sub(r"--num_train_epochs=\S+", f"--num_train_epochs={SLOW_EPOCHS}", code)
    _run_block(checkout, where, language, code, monkeypatch)


def test_the_examples_read_what_run_sample_sh_writes():
    script = (ROOT / "run_sample.sh").read_text()
    export = re.search(r'CKPT="\$OUT/(.*)/bert_model.ckpt"', script).group(1)
    assert f"out/sample/{export}" == BERT_BASE_DIR
    assert re.search(rf'cp "\$OUT/vocab.txt" "\$OUT/{export}/', script)
    assert 'OUT=${OUT:-out/sample}' in script
