"""Named entity data for token classification (`run_ner.py`): CoNLL-2003 column files read
into sentences, their tags brought to IOB2, each sentence cut into windows of word pieces
(`InputFeatures`) written as TFRecords, and the model's per-piece predictions put back
together as one tag per word.

As in the BERT paper (section 4.3), each word is WordPiece-tokenized on its own and only its
first piece carries the word's label and is predicted. Its other pieces (the paper's `X`),
[CLS], [SEP] and padding have label weight 0: they are left out of the loss and of the
predictions. A word that basic-tokenizes into several words ("U.S." -> U . S .) is still one
word with its label on the very first piece; a word WordPiece cannot split is one [UNK] piece
and keeps its label; a word of no pieces at all (only characters the tokenizer drops, such as
U+200B) becomes [UNK] too, so that every word is predicted.

Windows. A sentence of at most `max_seq_length - 2` pieces is one window, `[CLS] pieces [SEP]`;
a longer one is cut at word boundaries into windows of whole words, `windows.word_spans` (the
stride is run_ner.py's --doc_stride, half a window by default). Every word is predicted (label
weight 1) in exactly one of the windows that hold it, its max-context one. A single word of
more pieces than a window holds keeps only its first `max_seq_length - 2` pieces; its label is
on the first, as always. `modeling.export.word_windows` builds the same windows in the graph,
for the SavedModel.

No TensorFlow is imported here.
"""
import dataclasses
import os

from modeling.data import records, text, windows
from modeling.runtime import files

SCHEMES = ("auto", "iob1", "iob2")
SPLIT_FILES = {"train": ("train.txt",), "dev": ("valid.txt", "dev.txt"), "test": ("test.txt",)}
_DOCSTART = "-DOCSTART-"
_INT64_MASK = (1 << 64) - 1  # a negative int64 is the varint of its two's complement
_VARINTS = records.VarintTable(1 << 17)  # every id of the released vocabularies


@dataclasses.dataclass
class Sentence:
    """One sentence of a column file.

    Attributes:
      words: list of str, the first column of each token line.
      tags: list of str, the last column of each token line.
      lines: list of str, each token line as read, trailing whitespace removed: predictions are
        written back as one more column of these.
      path: str, the file read, for error messages.
      line_numbers: list of int, 1-based line number of each token line in `path`.
    """
    words: list
    tags: list
    lines: list
    path: str = "<unknown>"
    line_numbers: list = None

    def where(self, index):
        """'path:line' of word `index`, for error messages."""
        number = self.line_numbers[index] if self.line_numbers else "?"
        return f"{self.path}:{number}"


@dataclasses.dataclass
class InputFeatures:
    """One window of one sentence, packed as `[CLS] pieces [SEP]` and padded with 0.

    Attributes:
      sentence_index: int, index of the sentence in the list converted.
      window_index: int, index of the window within its sentence.
      tokens: list of str, the window's pieces with [CLS] and [SEP], unpadded.
      input_ids: list of int [max_seq_length].
      input_mask: list of int [max_seq_length], 1 for real pieces, 0 for padding.
      segment_ids: list of int [max_seq_length], all 0 (one segment).
      label_ids: list of int [max_seq_length], the word's index in the label list at the first
        piece of every word in the window, 0 elsewhere.
      label_weights: list of float [max_seq_length], 1.0 at the first piece of each word this
        window predicts (see the module docstring), 0.0 elsewhere.
      word_ids: list of int [max_seq_length], index in the sentence of the word whose first
        piece is at that position, -1 elsewhere (other pieces, [CLS], [SEP], padding).
    """
    sentence_index: int
    window_index: int
    tokens: list
    input_ids: list
    input_mask: list
    segment_ids: list
    label_ids: list
    label_weights: list
    word_ids: list


def read_conll(path):
    """Reads a CoNLL column file: one token per line (`word ... tag`, whitespace-separated,
    the tag last), a blank line between sentences; `-DOCSTART-` lines end a sentence and are
    dropped. Every token line must have the number of columns of the first, at least 2.

    Returns:
      list of `Sentence`, none empty.

    Raises:
      ValueError: naming file:line, for a line of one column or of another column count, or
        one that is not UTF-8.
    """
    path = os.fspath(path)
    sentences, columns_per_line = [], None
    words, tags, lines, numbers = [], [], [], []
    with open(path, "rb") as reader:
        for number, raw in enumerate(reader, start=1):
            line = text.decode_line(raw, path, number).rstrip()
            columns = line.split()
            if not columns or columns[0] == _DOCSTART:
                if words:
                    sentences.append(Sentence(words, tags, lines, path, numbers))
                    words, tags, lines, numbers = [], [], [], []
                continue
            if columns_per_line is None:
                columns_per_line = len(columns)
            if len(columns) < 2 or len(columns) != columns_per_line:
                expected = "at least 2" if len(columns) < 2 else str(columns_per_line)
                raise ValueError(f"{path}:{number}: expected {expected} whitespace-separated "
                                 f"columns (word ... tag), found {len(columns)}: {line!r}")
            words.append(columns[0])
            tags.append(columns[-1])
            lines.append(line)
            numbers.append(number)
    if words:
        sentences.append(Sentence(words, tags, lines, path, numbers))
    return sentences


def read_split(data_dir, split):
    """Reads `train.txt`, `valid.txt` (or else `dev.txt`) or `test.txt` of `data_dir`, for
    `split` "train", "dev" or "test"."""
    if split not in SPLIT_FILES:
        raise ValueError(f"Unknown split {split!r}; expected one of {sorted(SPLIT_FILES)}")
    for name in SPLIT_FILES[split]:
        path = os.path.join(data_dir, name)
        if os.path.exists(path):
            files.check_input(path, "--data_dir", data_dir)
            return read_conll(path)
    raise ValueError(f"{data_dir} holds none of {', '.join(SPLIT_FILES[split])}: "
                     f"--data_dir must hold the {split} file")


def _prefix_and_type(tag):
    prefix, _, entity_type = tag.partition("-")
    return prefix, entity_type


def _starts_inside(tags, index):
    """Whether tags[index] is an I- tag that begins an entity: after O, after another type, or
    first in the sentence (IOB1 does this; IOB2 never does)."""
    prefix, entity_type = _prefix_and_type(tags[index])
    return prefix == "I" and (index == 0 or _prefix_and_type(tags[index - 1])[1] != entity_type)


def detect_scheme(tag_sequences):
    """"iob1" if some entity begins with an I- tag, else "iob2" (the two agree on data where
    every entity begins with B-). `tag_sequences`: iterable of lists of tags, one a sentence."""
    for tags in tag_sequences:
        if any(_starts_inside(tags, index) for index in range(len(tags))):
            return "iob1"
    return "iob2"


def to_iob2(tags):
    """IOB1 -> IOB2 (list of str): an I- that begins an entity becomes B-. IOB2 is unchanged."""
    return [f"B-{tag[2:]}" if _starts_inside(tags, index) else tag
            for index, tag in enumerate(tags)]


def to_iob1(tags):
    """IOB2 -> IOB1 (list of str): B- stays only right after a tag of the same type."""
    out = []
    for index, tag in enumerate(tags):
        prefix, entity_type = _prefix_and_type(tag)
        if prefix == "B" and (index == 0 or _prefix_and_type(tags[index - 1])[1] != entity_type):
            tag = f"I-{entity_type}"
        out.append(tag)
    return out


def resolve_scheme(scheme, sentences):
    """"iob1" or "iob2": `scheme` itself, or for "auto" what `detect_scheme` finds in
    `sentences`."""
    if scheme not in SCHEMES:
        raise ValueError(f"Unknown tag scheme {scheme!r}; expected one of {SCHEMES}")
    return detect_scheme(s.tags for s in sentences) if scheme == "auto" else scheme


def normalize_tags(sentences, scheme):
    """Checks every tag and returns the sentences with IOB2 tags (their `lines` untouched).

    Args:
      sentences: list of `Sentence`.
      scheme: "auto", "iob1" or "iob2", the tags' scheme in the file.

    Raises:
      ValueError: naming file:line, for a tag other than O, B-type or I-type, or for an entity
        begun with I- when `scheme` is "iob2".
    """
    scheme = resolve_scheme(scheme, sentences)
    for sentence in sentences:
        for index, tag in enumerate(sentence.tags):
            prefix, entity_type = _prefix_and_type(tag)
            if tag != "O" and (prefix not in ("B", "I") or not entity_type):
                raise ValueError(f"{sentence.where(index)}: tag {tag!r} is neither O nor "
                                 f"B-<type> or I-<type>")
            if scheme == "iob2" and _starts_inside(sentence.tags, index):
                raise ValueError(f"{sentence.where(index)}: {tag} begins an entity, which "
                                 f"IOB2 tags never do: the file is IOB1 (scheme iob1 or auto)")
    return [dataclasses.replace(s, tags=to_iob2(s.tags)) for s in sentences]


def get_labels(sentences):
    """The label list: "O", then the other tags of `sentences` sorted."""
    return ["O"] + sorted({tag for s in sentences for tag in s.tags} - {"O"})


def window_stride(max_seq_length, stride=None):
    """`stride`, or for None the default: half a window, `(max_seq_length - 2) // 2`, at
    least 1."""
    return max((max_seq_length - 2) // 2, 1) if stride is None else stride


def convert_sentence(sentence, label_list, max_seq_length, tokenizer, stride=None,
                     sentence_index=0):
    """Cuts one sentence into windows (see the module docstring).

    Args:
      sentence: `Sentence` with IOB2 tags (see `normalize_tags`).
      label_list: list of str, from `get_labels` of the training sentences.
      max_seq_length: int, length of the packed, padded sequences; at least 3.
      tokenizer: a `tokenization.FullTokenizer`.
      stride: int, pieces from one window's start to the next's (rounded up to a word);
        None for `window_stride`'s default, half a window.
      sentence_index: int, stored in the features.

    Returns:
      list of `InputFeatures`, one per window, in order.

    Raises:
      ValueError: if `max_seq_length` < 3 or `stride` < 1, or naming file:line, for a tag not
        in `label_list`.
    """
    max_pieces = max_seq_length - 2  # [CLS], [SEP]
    stride = window_stride(max_seq_length, stride)
    if max_pieces < 1 or stride < 1:
        raise ValueError(f"Need max_seq_length >= 3 and stride >= 1, got {max_seq_length} "
                         f"and {stride}")
    label_map = {label: index for index, label in enumerate(label_list)}
    labels = []
    for index, tag in enumerate(sentence.tags):
        if tag not in label_map:
            raise ValueError(f"{sentence.where(index)}: tag {tag!r} is not one of the "
                             f"training labels {label_list}")
        labels.append(label_map[tag])
    pieces = [(tokenizer.tokenize(word) or ["[UNK]"])[:max_pieces] for word in sentence.words]
    spans, owners = windows.word_spans([len(p) for p in pieces], max_pieces, stride)
    features = []
    for window_index, (first, end) in enumerate(spans):
        window_pieces, label_ids, label_weights, word_ids = [], [0], [0.0], [-1]  # [CLS]'s
        for word in range(first, end):
            rest = len(pieces[word]) - 1
            window_pieces += pieces[word]
            label_ids += [labels[word]] + [0] * rest
            label_weights += [float(owners[word] == window_index)] + [0.0] * rest
            word_ids += [word] + [-1] * rest
        tokens, _ = text.pack(window_pieces)
        input_ids, input_mask = text.padded(tokenizer.convert_tokens_to_ids(tokens),
                                            max_seq_length)
        padding = max_seq_length - len(label_ids)  # [SEP]'s and the padding's
        features.append(InputFeatures(
            sentence_index=sentence_index, window_index=window_index, tokens=tokens,
            input_ids=input_ids, input_mask=input_mask, segment_ids=[0] * max_seq_length,
            label_ids=label_ids + [0] * padding, label_weights=label_weights + [0.0] * padding,
            word_ids=word_ids + [-1] * padding))
    return features


def convert_sentences(sentences, label_list, max_seq_length, tokenizer, stride=None):
    """`convert_sentence` of each sentence; all windows in order (list of `InputFeatures`)."""
    return [features for index, sentence in enumerate(sentences)
            for features in convert_sentence(sentence, label_list, max_seq_length, tokenizer,
                                             stride, sentence_index=index)]


# One window: `write_features` writes it, `modeling.tasks.ner` reads it.
RECORD_SCHEMA = records.Schema(
    input_ids=records.int64s("max_seq_length"),
    input_mask=records.int64s("max_seq_length"),
    segment_ids=records.int64s("max_seq_length"),
    label_ids=records.int64s("max_seq_length"),
    label_weights=records.floats("max_seq_length"),
    word_ids=records.int64s("max_seq_length"),
    sentence_index=records.int64s(1))


def _int64s(values):
    if min(values) >= 0:
        try:
            return _VARINTS.encode(values)
        except IndexError:  # an id beyond the table
            pass
    return b"".join(records.varint(v & _INT64_MASK) for v in values)


def write_features(features, output_file):
    """Writes `InputFeatures` as TFRecords (`RECORD_SCHEMA`), atomically. Returns the count.

    Each record holds, with S = max_seq_length (the features'): int64 `input_ids`,
    `input_mask`, `segment_ids`, `label_ids` and `word_ids` [S], float `label_weights` [S],
    and int64 `sentence_index` [1].
    """
    with files.atomic_write(output_file, "wb") as writer:
        encoder = None
        for feature in features:
            if encoder is None:
                encoder = RECORD_SCHEMA.encoder(max_seq_length=len(feature.input_ids))
            writer.write(records.frame(encoder.serialize({
                "input_ids": _int64s(feature.input_ids),
                "input_mask": _int64s(feature.input_mask),
                "segment_ids": _int64s(feature.segment_ids),
                "label_ids": _int64s(feature.label_ids),
                "label_weights": feature.label_weights,
                "word_ids": _int64s(feature.word_ids),
                "sentence_index": _int64s([feature.sentence_index]),
            })))
    return len(features)


def assemble_predictions(sentences, features, predicted_ids, label_list):
    """Puts per-piece predictions back together as one tag per word.

    Args:
      sentences: list of `Sentence`, as converted.
      features: the `InputFeatures` of all their windows, in any order.
      predicted_ids: per window (in the order of `features`), the predicted label index at
        each position: int array-like [num_windows, max_seq_length]. Only the positions of
        label weight 1 are read.

    Returns:
      list (one per sentence) of lists of str: the predicted tag of each word.

    Raises:
      ValueError: if the counts differ, or a word is predicted by no window or by several.
    """
    if len(features) != len(predicted_ids):
        raise ValueError(f"{len(features)} windows but {len(predicted_ids)} predictions")
    tags = [[None] * len(s.words) for s in sentences]
    for feature, predictions in zip(features, predicted_ids):
        for position, word in enumerate(feature.word_ids):
            if feature.label_weights[position] > 0:
                sentence = tags[feature.sentence_index]
                if sentence[word] is not None:
                    raise ValueError(f"Word {word} of sentence {feature.sentence_index} is "
                                     f"predicted by more than one window")
                sentence[word] = label_list[int(predictions[position])]
    for index, sentence in enumerate(tags):
        if None in sentence:
            raise ValueError(f"Word {sentence.index(None)} of sentence {index} "
                             f"({sentences[index].where(sentence.index(None))}) is predicted "
                             f"by no window")
    return tags


def write_predictions(sentences, predicted_tags, path):
    """Writes each sentence's lines with its predicted tag as one more column (tab-separated
    if the line has tabs, else space-separated), a blank line after each sentence, atomically:
    `word ... gold predicted`, the input of `conlleval`. `-DOCSTART-` lines are not written."""
    if len(sentences) != len(predicted_tags):
        raise ValueError(f"{len(sentences)} sentences but {len(predicted_tags)} predicted")
    for index, (sentence, tags) in enumerate(zip(sentences, predicted_tags)):
        if len(tags) != len(sentence.lines):
            raise ValueError(f"Sentence {index} ({sentence.where(0)}) has "
                             f"{len(sentence.lines)} words but {len(tags)} predicted tags")
    with files.atomic_write(path) as writer:
        for sentence, tags in zip(sentences, predicted_tags):
            for line, tag in zip(sentence.lines, tags):
                separator = "\t" if "\t" in line else " "
                writer.write(f"{line}{separator}{tag}\n")
            writer.write("\n")
