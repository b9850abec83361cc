"""BERT's WordPiece tokenizer, behaving exactly as the original release's.

The pipeline is the one BERT was pre-trained with:

    text -> BasicTokenizer (clean, space out CJK, whitespace split, optional
                    lower case + accent stripping, punctuation split)
              -> WordpieceTokenizer (greedy longest-match-first against the vocab)

Every step must give the same tokens as the original code, since a model only
understands the ids it was trained on. The character classes are therefore the
original's own definitions (which differ from Python's: `str.isspace`, for
example, calls U+001C a space where BERT calls it a control character) and are
looked up in tables that fill themselves lazily, so a large corpus pays for
`unicodedata` once per distinct character rather than once per character.

This module is pure Python: data pipelines may import it without TensorFlow.
"""

import collections
import re
import unicodedata

# A vocab line of only these is a mistake (a stray space, "\r" or newline).
# Other Unicode whitespace can be a real entry: see `load_vocab`.
_ASCII_WHITESPACE = " \t\n\r\x0b\x0c"

# FullTokenizer refuses a vocabulary without these: the data and task code
# needs them to build model inputs, and WordPiece needs [UNK].
SPECIAL_TOKENS = ("[UNK]", "[CLS]", "[SEP]")

# Checkpoints of the original release, by whether they were pre-trained on
# lower-cased text. Only these names are checked; others pass silently.
_LOWER_CASED_MODELS = (
    "uncased_L-24_H-1024_A-16",
    "uncased_L-12_H-768_A-12",
    "multilingual_L-12_H-768_A-12",
    "chinese_L-12_H-768_A-12",
)
_CASED_MODELS = (
    "cased_L-12_H-768_A-12",
    "cased_L-24_H-1024_A-16",
    "multi_cased_L-12_H-768_A-12",
)

# Words a WordpieceTokenizer remembers the split of: some 10 MB at most.
_MAX_CACHED_WORDS = 1 << 16

# Code-point ranges the original treats as "Chinese" (the CJK Unified
# Ideographs blocks and their compatibility forms): each such character
# becomes a word of its own, since Chinese puts no spaces between words.
# Hiragana, Katakana and Hangul lie outside them and split like any script.
_CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def validate_case_matches_checkpoint(do_lower_case, init_checkpoint):
    """Checks that the casing flag fits a known original checkpoint.

    A cased model fed lower-cased text (or the reverse) still trains, just
    worse, so this mistake is otherwise silent. The model name is read from the
    directory holding `bert_model.ckpt`; unknown names are not checked.

    Args:
        do_lower_case: bool, whether the input text will be lower-cased.
        init_checkpoint: str or None, path of the checkpoint to start from, e.g.
            ".../uncased_L-12_H-768_A-12/bert_model.ckpt".

    Raises:
        ValueError: if the checkpoint is a known uncased model and
            `do_lower_case` is False, or a known cased model and it is True.
    """
    if not init_checkpoint:
        return
    match = re.match("^.*?([A-Za-z0-9_-]+)/bert_model.ckpt", init_checkpoint)
    if match is None:
        return
    model_name = match.group(1)

    if model_name in _LOWER_CASED_MODELS and not do_lower_case:
        actual, expected, kind = "False", "True", "lowercased"
    elif model_name in _CASED_MODELS and do_lower_case:
        actual, expected, kind = "True", "False", "cased"
    else:
        return
    raise ValueError(
        f"`--do_lower_case={actual}` was given with "
        f"`--init_checkpoint={init_checkpoint}`, but `{model_name}` looks like "
        f"a {kind} model: pass `--do_lower_case={expected}` so that fine-tuning "
        "sees text cased the way pre-training did. If this check is wrong for "
        "your checkpoint, remove it.")


def convert_to_unicode(text):
    """Returns `text` as `str`, decoding UTF-8 bytes and dropping bad bytes.

    Args:
        text: str or bytes.

    Returns:
        str.

    Raises:
        ValueError: for any other type.
    """
    if isinstance(text, str):
        return text
    if isinstance(text, bytes):
        # "ignore", not "strict": the original silently drops undecodable bytes,
        # and a corpus must tokenize the same way here.
        return text.decode("utf-8", "ignore")
    raise ValueError(f"Unsupported string type: {type(text)}")


def load_vocab(vocab_file):
    """Reads a WordPiece vocabulary: one token per line, id = line index.

    Lines are split on "\\n" only and each is `str.strip()`ped, as the
    original does, so a `\\r\\n` file reads the same as an `\\n` one. Unlike
    the original, which let a later duplicate silently take over a token and
    left a hole in the ids, a duplicate or blank line is an error here.

    "Blank" means empty or ASCII whitespace only. A line holding only Unicode
    whitespace is a real entry that `strip()` turns into the token "", as in
    the original: Google's Chinese vocab has U+2028 on line 344 (id 343), and
    refusing or dropping it would shift every later id.

    The special tokens are not checked; see `check_special_tokens`.

    Args:
        vocab_file: str or os.PathLike, a local UTF-8 text file.

    Returns:
        collections.OrderedDict mapping token (str) to id (int), in file order.

    Raises:
        FileNotFoundError: if `vocab_file` does not exist.
        ValueError: if the file is not UTF-8, or has a blank line or a duplicate
            token before its end. One final newline, or none, is fine.
    """
    try:
        with open(vocab_file, encoding="utf-8-sig", newline="") as reader:
            contents = reader.read()
    except FileNotFoundError:
        raise FileNotFoundError(
            f"Vocabulary file not found: {vocab_file}") from None
    except UnicodeDecodeError as error:
        raise ValueError(
            f"Vocabulary file {vocab_file} is not valid UTF-8: {error}") from None

    lines = contents.split("\n")
    if lines[-1] == "":
        # What follows the final newline, or the whole of an empty file.
        lines.pop()

    vocab = collections.OrderedDict()
    for index, line in enumerate(lines):
        if not line.strip(_ASCII_WHITESPACE):
            raise ValueError(
                f"Vocabulary file {vocab_file}, line {index + 1}: blank line.")
        token = line.strip()
        if token in vocab:
            raise ValueError(
                f"Vocabulary file {vocab_file}, line {index + 1}: duplicate token "
                f"{token!r}, first seen on line {vocab[token] + 1}.")
        vocab[token] = index
    return vocab


def check_special_tokens(vocab, vocab_file):
    """Checks that a vocabulary holds every token in `SPECIAL_TOKENS`.

    Args:
        vocab: mapping from token (str) to id (int).
        vocab_file: the file `vocab` came from; only used in the message.

    Raises:
        ValueError: naming the missing tokens and the file.
    """
    missing = [token for token in SPECIAL_TOKENS if token not in vocab]
    if missing:
        raise ValueError(
            f"Vocabulary file {vocab_file} lacks the special token(s) "
            f"{', '.join(missing)}.")


def convert_by_vocab(vocab, items):
    """Maps each item through `vocab`.

    Args:
        vocab: mapping, e.g. token -> id or id -> token.
        items: iterable of keys of `vocab`.

    Returns:
        list of the mapped values, in order.

    Raises:
        KeyError: for an item not in `vocab`.
    """
    return [vocab[item] for item in items]


def convert_tokens_to_ids(vocab, tokens):
    """Returns the ids (list of int) of `tokens` under `vocab`."""
    return convert_by_vocab(vocab, tokens)


def convert_ids_to_tokens(inv_vocab, ids):
    """Returns the tokens (list of str) of `ids` under `inv_vocab`."""
    return convert_by_vocab(inv_vocab, ids)


def whitespace_tokenize(text):
    """Splits `text` on Python whitespace; [] for blank text."""
    return text.split()


def _is_whitespace(char):
    """BERT's whitespace: space, \\t, \\n, \\r and category Zs."""
    if char in " \t\n\r":
        return True
    return unicodedata.category(char) == "Zs"


def _is_control(char):
    """BERT's control characters: categories Cc and Cf, except \\t\\n\\r.

    Private use (Co), surrogates (Cs) and unassigned code points (Cn) are not
    control characters here, as in the original.
    """
    if char in "\t\n\r":
        return False
    return unicodedata.category(char) in ("Cc", "Cf")


def _is_punctuation(char):
    """BERT's punctuation: category P*, plus every non-alphanumeric ASCII sign.

    The ASCII ranges add symbols such as "$", "+", "^" and "`" that Unicode
    files under S*, so that they split words the way BERT's vocab expects.
    """
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _is_chinese_char(cp):
    """Whether code point `cp` lies in one of BERT's CJK ideograph ranges."""
    return any(low <= cp <= high for low, high in _CJK_RANGES)


class _CleanTable(dict):
    """`str.translate` table: BERT's text cleaning plus CJK spacing in one pass.

    Maps a code point to None (drop NUL, U+FFFD and control characters), to " "
    (BERT whitespace), to " c " (a CJK ideograph gets spaces around it) or to
    itself. One pass gives what the original's clean-then-space-CJK passes
    give, because the two rules never meet: an ideograph is neither control
    nor whitespace. Entries are computed on first sight.
    """

    def __missing__(self, cp):
        char = chr(cp)
        if cp == 0 or cp == 0xFFFD or _is_control(char):
            value = None
        elif _is_whitespace(char):
            value = " "
        elif _is_chinese_char(cp):
            value = f" {char} "
        else:
            value = char
        self[cp] = value
        return value


class _PunctuationTable(dict):
    """`str.translate` table that puts spaces around BERT punctuation.

    Splitting the spaced text on whitespace gives what the original's
    per-token punctuation split gives after its final whitespace split.
    """

    def __missing__(self, cp):
        char = chr(cp)
        value = f" {char} " if _is_punctuation(char) else char
        self[cp] = value
        return value


class _MarkTable(dict):
    """`str.translate` table that drops nonspacing marks (category Mn)."""

    def __missing__(self, cp):
        value = None if unicodedata.category(chr(cp)) == "Mn" else cp
        self[cp] = value
        return value


# Shared by every tokenizer: the tables depend only on Unicode data.
_CLEAN_TABLE = _CleanTable()
_PUNCTUATION_TABLE = _PunctuationTable()
_MARK_TABLE = _MarkTable()


def _strip_accents(text):
    """Decomposes `text` (NFD) and drops its nonspacing marks (category Mn)."""
    if text.isascii():
        return text  # NFD leaves ASCII alone and ASCII has no marks.
    return unicodedata.normalize("NFD", text).translate(_MARK_TABLE)


class BasicTokenizer:
    """Splits text into words and punctuation, before WordPiece.

    Attributes:
        do_lower_case: bool, whether to lower-case and strip accents.
    """

    def __init__(self, do_lower_case=True):
        """Builds the tokenizer.

        Args:
            do_lower_case: bool, True for uncased models. Lower-cases each word,
                then strips accents (NFD, drop category Mn), as uncased BERT was
                pre-trained.
        """
        self.do_lower_case = do_lower_case

    def tokenize(self, text):
        """Tokenizes one piece of text.

        Args:
            text: str, or UTF-8 bytes.

        Returns:
            list of str: words and punctuation marks, none empty.
        """
        text = convert_to_unicode(text).translate(_CLEAN_TABLE)
        if self.do_lower_case:
            text = self._lower_and_strip_accents(text)
        return text.translate(_PUNCTUATION_TABLE).split()

    @staticmethod
    def _lower_and_strip_accents(text):
        """Lower-cases and strips accents: what the original does word by word.

        Doing the whole text at once is faster and gives the same words. `str.lower` maps
        each character on its own except capital sigma, which becomes final "ς" by the letters
        around it; whitespace is neither a letter nor skipped over in that look-around (it is
        not "case-ignorable"), so the context never reaches into the next word. NFD and
        dropping marks cannot reach across whitespace either.
        """
        return _strip_accents(text.lower())


class WordpieceTokenizer:
    """Splits words into WordPiece sub-words, greedy longest-match-first.

    "unaffable" -> ["un", "##aff", "##able"] when those pieces are in the vocab:
    from each position the longest vocab entry is taken; pieces after the first
    carry the "##" continuation prefix. A word with any position no entry
    matches becomes the single `unk_token`.

    Words are cached once split, since a few words make up most of any text.
    The cache assumes that `vocab` does not change after construction.

    Attributes:
        vocab: mapping from token (str) to id (int).
        unk_token: str, the token for a word that cannot be split.
        max_input_chars_per_word: int, longer words become `unk_token` unsplit.
    """

    def __init__(self, vocab, unk_token="[UNK]", max_input_chars_per_word=200):
        """Builds the tokenizer.

        Args:
            vocab: mapping from token (str) to id (int); only membership is used.
            unk_token: str, emitted for a word that cannot be split.
            max_input_chars_per_word: int, longer words become `unk_token` without
                a search (the search is quadratic in the word length).
        """
        self.vocab = vocab
        self.unk_token = unk_token
        self.max_input_chars_per_word = max_input_chars_per_word
        self._cache = {}

    def tokenize(self, text):
        """Tokenizes text already split by `BasicTokenizer`.

        Args:
            text: str (or UTF-8 bytes) of whitespace-separated words.

        Returns:
            list of str: the word pieces of every word, in order.
        """
        output_tokens = []
        for word in whitespace_tokenize(convert_to_unicode(text)):
            output_tokens.extend(self.tokenize_word(word))
        return output_tokens

    def tokenize_word(self, word):
        """Splits one word.

        Args:
            word: str without whitespace.

        Returns:
            tuple of str: the word's pieces, or (unk_token,).
        """
        pieces = self._cache.get(word)
        if pieces is None:
            pieces = self._split_word(word)
            # Bounded, so that a huge corpus cannot grow it without end; the words
            # seen first are mostly the frequent ones anyway.
            if len(self._cache) < _MAX_CACHED_WORDS:
                self._cache[word] = pieces
        return pieces

    def _split_word(self, word):
        """Greedy longest-match-first split of one word; returns a tuple."""
        if len(word) > self.max_input_chars_per_word:
            return (self.unk_token,)
        vocab = self.vocab
        pieces = []
        start = 0
        while start < len(word):
            prefix = "##" if start > 0 else ""
            for end in range(len(word), start, -1):
                piece = prefix + word[start:end]
                if piece in vocab:
                    break
            else:
                return (self.unk_token,)
            pieces.append(piece)
            start = end
        return tuple(pieces)


class FullTokenizer:
    """End-to-end tokenizer: BasicTokenizer, then WordPiece, then ids.

    Attributes:
        vocab: collections.OrderedDict mapping token (str) to id (int).
        inv_vocab: dict mapping id (int) to token (str).
        basic_tokenizer: BasicTokenizer.
        wordpiece_tokenizer: WordpieceTokenizer.
    """

    def __init__(self, vocab_file, do_lower_case=True):
        """Loads and validates the vocabulary.

        Args:
            vocab_file: str or os.PathLike, the model's `vocab.txt`.
            do_lower_case: bool, True for uncased models.

        Raises:
            FileNotFoundError: if `vocab_file` does not exist.
            ValueError: if the vocabulary is malformed (see `load_vocab`) or lacks
                one of `SPECIAL_TOKENS`.
        """
        self.vocab = load_vocab(vocab_file)
        check_special_tokens(self.vocab, vocab_file)
        self.inv_vocab = {index: token for token, index in self.vocab.items()}
        self.basic_tokenizer = BasicTokenizer(do_lower_case=do_lower_case)
        self.wordpiece_tokenizer = WordpieceTokenizer(vocab=self.vocab)

    def tokenize(self, text):
        """Tokenizes `text` (str or UTF-8 bytes) into a list of word pieces."""
        # Basic tokens hold no whitespace, so each is one WordPiece word.
        tokenize_word = self.wordpiece_tokenizer.tokenize_word
        split_tokens = []
        for token in self.basic_tokenizer.tokenize(text):
            split_tokens.extend(tokenize_word(token))
        return split_tokens

    def convert_tokens_to_ids(self, tokens):
        """Returns the ids (list of int) of `tokens` (list of str)."""
        return convert_by_vocab(self.vocab, tokens)

    def convert_ids_to_tokens(self, ids):
        """Returns the tokens (list of str) of `ids` (list of int)."""
        return convert_by_vocab(self.inv_vocab, ids)
