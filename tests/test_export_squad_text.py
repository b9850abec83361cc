"""The original `get_final_text` in the graph: the same cut of the same words, character for
character, including every way the original falls back to the whole words."""
import pytest

from conftest import REFS
from modeling.evaluation import squad_answers
from modeling.text import tokenization

tf = pytest.importorskip("tensorflow")
squad_text = pytest.importorskip("modeling.export.squad_text")
GraphTokenizer = pytest.importorskip("modeling.text.graph_tokenizer").GraphTokenizer

# orig_text as run_squad.py builds it: whitespace-separated words joined by one space.
ORIG_TEXTS = [
    "Steve Smith's", "rowed", "Zürich.", "a-a-a", "the ÉCOLE normale", "x\u00a0y z",
    "Σίσυφος ΣΑΣ", "[UNK] stuff", "naïve café", "1,000,000 km²", "well-known (1999)", "ﬁne",
    "İstanbul", "e\u0301t\u00e9", "東京都 tower", "don't", "$5.6 million", "\u200bzero width",
]


def _cases(python):
    """(pred_text, orig_text) for every span of at most 4 pieces of each text."""
    for orig in ORIG_TEXTS:
        pieces = python.tokenize(orig)
        for start in range(len(pieces)):
            for end in range(start, min(len(pieces), start + 4)):
                text = " ".join(pieces[start:end + 1]).replace(" ##", "").replace("##", "")
                yield pieces[start:end + 1], " ".join(text.strip().split()), orig


@pytest.mark.parametrize("vocab_name, do_lower_case", [("uncased_vocab.txt", True),
                                                       ("cased_vocab.txt", False)])
def test_the_graph_cuts_every_span_as_get_final_text(vocab_name, do_lower_case):
    vocab = REFS / "vocab" / vocab_name
    if not vocab.exists():
        pytest.skip(f"{vocab} is absent: the reference data lives in ../shared")
    python = tokenization.FullTokenizer(str(vocab), do_lower_case)
    cases = list(_cases(python))
    pieces, expected_pred, origs = zip(*cases)
    graph = GraphTokenizer(str(vocab), do_lower_case)
    pred = squad_text.pred_text(tf.ragged.constant(pieces, dtype=tf.string))
    assert [p.decode() for p in pred.numpy()] == list(expected_pred)
    first, last = squad_text.final_span(
        pred, tf.strings.unicode_decode(tf.constant(origs), "UTF-8"), graph)
    got = [orig[f:l + 1] for orig, f, l in zip(origs, first.numpy(), last.numpy())]
    expected = [squad_answers.get_final_text(p, orig, do_lower_case)
                for p, orig in zip(expected_pred, origs)]
    assert got == expected
    # Cut inside a word ("ed" of "rowed"), and fallen back to the whole words: both occur.
    assert any(g != orig for g, orig in zip(got, origs))
    assert any(g == orig and len(p) < len(orig) for g, p, orig in zip(got, expected_pred, origs))
