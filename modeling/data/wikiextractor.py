"""WikiExtractor's `<doc>` files as `create_pretraining_data.py` reads text: one sentence per
line, a blank line between documents. No TensorFlow is imported here.

WikiExtractor writes each article as a `<doc id=... title=...>` line, the title, a blank
line, then one paragraph per line (section headings are short lines of their own) and
`</doc>`. The title repeats the tag's and is dropped; paragraphs are cut into sentences by
punctuation, which is what the original's corpus preparation did with its own splitter (the
original release leaves that step to the user).
"""
import re

# A sentence ends at . ! or ? (and any closing quotes or brackets) before white space and an
# upper-case letter, a digit or an opening quote or bracket.
_BOUNDARY = re.compile(r"(?<=[.!?])([\"')\]]*)\s+(?=[\"'(\[]?[A-Z0-9])")
# What ends in a period without ending a sentence: an initial ("J. R. R."), and these words.
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof st jr sr vs etc e.g i.e no vol pp fig ca c jan feb mar apr jun jul aug "
    "sep sept oct nov dec gen gov col lt sgt mt ft inc ltd co corp u.s u.k".split())


def split_sentences(paragraph):
    """The sentences of one paragraph, in order, stripped.

    Args:
      paragraph: str, one line of running text.

    Returns:
      list of non-empty str.
    """
    sentences, start = [], 0
    for boundary in _BOUNDARY.finditer(paragraph):
        end = boundary.start() + len(boundary.group(1))
        words = paragraph[start:end].split()
        last_word = words[-1].rstrip(".!?\"')]").lower() if words else ""
        if len(last_word) <= 1 and last_word.isalpha() or last_word in _ABBREVIATIONS:
            continue
        sentences.append(paragraph[start:end].strip())
        start = boundary.end()
    sentences.append(paragraph[start:].strip())
    return [sentence for sentence in sentences if sentence]


def to_pretraining_lines(lines, source="input"):
    """Yields the lines of `create_pretraining_data.py`'s input from WikiExtractor's.

    Args:
      lines: iterable of str, the lines of one or more WikiExtractor files.
      source: the name errors give the input by.

    Yields:
      str without a line terminator: a sentence, or "" after each document.

    Raises:
      ValueError: text outside a `<doc>`, or a `<doc>` not closed, naming the line.
    """
    in_document = title_pending = False
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if line.startswith("<doc ") or line == "<doc>":
            if in_document:
                raise ValueError(f"{source}:{number}: <doc> inside a <doc> not closed")
            in_document = title_pending = True
        elif line == "</doc>":
            if not in_document:
                raise ValueError(f"{source}:{number}: </doc> without a <doc>")
            in_document = False
            yield ""
        elif not line:
            continue
        elif not in_document:
            raise ValueError(f"{source}:{number}: text outside a <doc>...</doc>; is this "
                             f"WikiExtractor's output?")
        elif title_pending:
            title_pending = False  # the title line repeats the tag's title
        else:
            yield from split_sentences(line)
    if in_document:
        raise ValueError(f"{source}: the last <doc> is not closed by </doc>")
