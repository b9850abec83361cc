"""Reading text files as the original reads them, and packing text pairs as `[CLS] a [SEP]
(b [SEP])`: what every data module shares, without TensorFlow or the corpus pipeline. The
examples and features are the original `extract_features.py`'s input."""
import codecs
import csv
import dataclasses
import io
import json
import re

# csv's default field limit is 128 KiB; real sentences and documents can be longer.
FIELD_SIZE_LIMIT = 2 ** 31 - 1


def decode_line(raw, path, number):
    """One line's bytes as the original's `tf.gfile` text reader gives it: every "\\r"
    dropped, strict UTF-8. A UTF-8 byte order mark opening line 1 is dropped: editors on
    Windows write one, and it would otherwise stick to the file's first word.

    Raises:
      ValueError: the line is not UTF-8 (the original dies with a UnicodeDecodeError there);
        the message names the file and line.
    """
    if number == 1 and raw.startswith(codecs.BOM_UTF8):
        raw = raw[len(codecs.BOM_UTF8):]
    try:
        return raw.replace(b"\r", b"").decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}:{number}: not valid UTF-8 ({error.reason} at byte "
                         f"{error.start})") from None


def read_tsv(path):
    """Rows of a GLUE TSV: tab-separated, no quoting (GLUE text holds bare `"`), a UTF-8 BOM
    tolerated, fields of any length. Returns a list of (line number, list of fields).

    Raises:
      ValueError: the file is not UTF-8; names the file and the line.
    """
    with open(path, "rb") as reader:
        data = reader.read()
    try:
        content = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ValueError(f"{path}:{line}: not valid UTF-8 ({error.reason})") from None
    csv.field_size_limit(FIELD_SIZE_LIMIT)
    rows = csv.reader(io.StringIO(content, newline=""), delimiter="\t", quotechar=None)
    return list(enumerate(rows, start=1))


def read_json(path):
    """Parses a UTF-8 JSON file, a byte order mark tolerated (as `read_tsv` tolerates one).
    Remote paths (gs://...) are read through `tf.io.gfile`.

    Raises:
      ValueError: the file is not UTF-8 or not JSON; names the file.
    """
    if "://" in str(path):
        import tensorflow as tf
        with tf.io.gfile.GFile(path, "rb") as reader:
            data = reader.read()
    else:
        with open(path, "rb") as reader:
            data = reader.read()
    try:
        return json.loads(data.decode("utf-8-sig"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{path} is not a UTF-8 JSON file: {error}") from None


def check_unique_ids(path, ids):
    """Refuses an input in which two examples share an id: the outputs (predictions.json,
    test_results.tsv) are keyed by id, and one example's would silently replace or shadow the
    other's.

    Args:
      path: the file read, for the message.
      ids: iterable of (id, where): where the example is in the file ("line 7").

    Raises:
      ValueError: naming the file, the id and both places.
    """
    first = {}
    for key, where in ids:
        if key in first:
            raise ValueError(f"{path}: id {key!r} is used twice, at {first[key]} and at {where}; "
                             f"outputs are keyed by id")
        first[key] = where


def truncate_seq_pair(tokens_a, tokens_b, max_length):
    """Pops tokens from the end of the longer list until the pair fits, in place.

    Trimming the longer one keeps more of the shorter, which carries as much meaning per token.
    """
    while len(tokens_a) + len(tokens_b) > max_length:
        longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        longer.pop()

def pack(tokens_a, tokens_b=None):
    """The original's packing, `[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]`, as
    `BertInputPacker` packs inside the graph.

    Args:
      tokens_b: None for one segment; a list, empty ones included, for two.

    Returns:
      (tokens, segment_ids): the packed tokens, and 0 for `[CLS] a [SEP]`, 1 for `b [SEP]`.
    """
    tokens = ["[CLS]", *tokens_a, "[SEP]"]
    segment_ids = [0] * len(tokens)
    if tokens_b is not None:
        tokens += [*tokens_b, "[SEP]"]
        segment_ids += [1] * (len(tokens_b) + 1)
    return tokens, segment_ids


def padded(values, length):
    """(`values` padded with zeros to `length`, the mask: 1 for each value, 0 for padding)."""
    padding = [0] * (length - len(values))
    return list(values) + padding, [1] * len(values) + padding


_PAIR = re.compile(r"^(.*) \|\|\| (.*)$")


@dataclasses.dataclass
class InputExample:
    unique_id: int
    text_a: str
    text_b: str = None


@dataclasses.dataclass
class InputFeatures:
    """One packed sequence: `tokens` unpadded; the id lists padded to the sequence length."""
    unique_id: int
    tokens: list
    input_ids: list
    input_mask: list
    input_type_ids: list


def read_examples(input_file):
    """Reads one example per line: `text` or `text_a ||| text_b`.

    Lines are split on "\\n" alone and every "\\r" is dropped, as the original's `tf.gfile`
    reader does; a blank line is an (empty) example, as in the original.

    Raises:
      ValueError: a line is not valid UTF-8 (the original crashes there); names file and line.
    """
    if "://" in str(input_file):  # gs://...: only then is TensorFlow needed
        import tensorflow as tf
        with tf.io.gfile.GFile(input_file, "rb") as reader:
            data = reader.read()
    else:
        with open(input_file, "rb") as reader:
            data = reader.read()
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    examples = []
    for number, raw in enumerate(lines, start=1):
        line = decode_line(raw, input_file, number).strip()
        match = _PAIR.match(line)
        text_a, text_b = (line, None) if match is None else match.groups()
        examples.append(InputExample(unique_id=len(examples), text_a=text_a, text_b=text_b))
    return examples



def convert_examples_to_features(examples, seq_length, tokenizer):
    """Tokenizes and packs `[CLS] a [SEP] (b [SEP])`, truncating and padding to `seq_length`.

    Returns:
      A list of `InputFeatures`, one per example.
    """
    features = []
    for example in examples:
        tokens_a = tokenizer.tokenize(example.text_a)
        tokens_b = tokenizer.tokenize(example.text_b) if example.text_b else None
        if tokens_b:
            truncate_seq_pair(tokens_a, tokens_b, seq_length - 3)  # [CLS], [SEP], [SEP]
        else:
            tokens_a = tokens_a[:seq_length - 2]  # [CLS], [SEP]
        tokens, input_type_ids = pack(tokens_a, tokens_b or None)  # an empty b: one segment
        input_ids, input_mask = padded(tokenizer.convert_tokens_to_ids(tokens), seq_length)
        features.append(InputFeatures(
            unique_id=example.unique_id, tokens=tokens, input_ids=input_ids,
            input_mask=input_mask, input_type_ids=padded(input_type_ids, seq_length)[0]))
    return features
