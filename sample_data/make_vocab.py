"""Writes sample_data/vocab.txt from sample_text.txt: a stand-in until a learned vocabulary.

The layout is the original's: [PAD], [unused0..9], [UNK], [CLS], [SEP], [MASK], then every
character alone and as a `##` suffix, then every whole lower-cased word of the corpus.
"""
import pathlib
import re

HERE = pathlib.Path(__file__).parent
text = (HERE / "sample_text.txt").read_text(encoding="utf-8").lower()
words = sorted(set(re.findall(r"[a-z]+", text)))
chars = sorted(set(re.sub(r"\s", "", text)))
tokens = (["[PAD]"] + [f"[unused{i}]" for i in range(10)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
          + chars + [f"##{c}" for c in chars if c.isalnum()]
          + [w for w in words if w not in chars])
(HERE / "vocab.txt").write_text("\n".join(tokens) + "\n", encoding="utf-8")
