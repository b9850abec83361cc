"""The files of SemEval-2019 Task 4, Hyperpartisan News Detection, by article, and the split
that run_classifier.py's `hyperpartisan` task uses.

articles-*byarticle*.xml: `<articles>` of `<article id=... title=...>`, the article's text
inside with HTML-like markup (`<p>`, `<a href=...>`, `<q>`). ground-truth-*byarticle*.xml:
`<article id=... hyperpartisan="true|false" .../>`.

Text: the character data of an article, concatenated as the parser delivers it (expat cuts
a text anywhere: at its buffer's end, a line break, an entity), and a space for every tag
inside the article, its text kept (a link's or a quote's words are the article's). A tag is
a space, block (`<p>`) or inline (`<a>`, `<q>`) alike, because the only tags found between two
letters are link ends, and the scrape lost the space at a link's end ("saying</a>that") far
more often than a link ends inside a word ("Israe</a>l", which so reads "Israe l"); a
paragraph or quote boundary is a break anyway.
The article's text is HTML escaped once more inside the XML (`S&amp;amp;P`, `&amp;gt;`), so
its entities are decoded twice: once by the parser, once as HTML; the title, a plain
attribute, once. Runs of whitespace become one space. The text is the title, a space, then
the article's text.

The split has no official form (the task's test set was never released): an article falls in
test, dev or train by the SHA-256 of "hyperpartisan split " and its id, modulo 10 (0 test,
1 dev, else train): about 80/10/10, the same for an article whatever else is in the files (the
516 staged articles: 404 train, 64 dev, 48 test). The salt keeps it apart from the staging's
own hash of the bare ids, which held 129 articles back.

No TensorFlow is imported here.
"""
import collections
import glob
import hashlib
import html
import os
from xml.parsers import expat

ARTICLES = "articles-*byarticle*.xml"
TRUTH = "ground-truth-*byarticle*.xml"
LABELS = ("false", "true")
SPLIT_SALT = "hyperpartisan split "

Article = collections.namedtuple("Article", ["id", "text", "source"])
Article.__doc__ = "One article: its id, title and text as one string, and its 'path:line'."


def find(data_dir, pattern):
    """The one file of `data_dir` that matches `pattern`; ValueError unless exactly one."""
    found = sorted(glob.glob(os.path.join(glob.escape(data_dir), pattern)))
    if len(found) != 1:
        raise ValueError(f"--data_dir={data_dir} must hold one {pattern} file of the "
                         f"Hyperpartisan by-article data; found {len(found) or 'none'}"
                         + (f": {', '.join(os.path.basename(f) for f in found)}" if found else ""))
    return found[0]


def split_of(article_id):
    """'train', 'dev' or 'test': the article's split (see the module's docstring)."""
    bucket = int(shuffle_key(article_id), 16) % 10
    return "test" if bucket == 0 else "dev" if bucket == 1 else "train"


def shuffle_key(article_id):
    """A fixed pseudo-random key of the article: sorting by it shuffles, the same every run."""
    return hashlib.sha256((SPLIT_SALT + article_id).encode("utf-8")).hexdigest()


def _parse(path, start, end=None, data=None):
    """Runs expat over the file with the handlers, which get the parser as first argument.

    Raises:
      ValueError: the XML is not well-formed; names the file and line.
    """
    parser = expat.ParserCreate("UTF-8")
    parser.StartElementHandler = lambda name, attrs: start(parser, name, attrs)
    if end:
        parser.EndElementHandler = lambda name: end(parser, name)
    if data:
        parser.CharacterDataHandler = data
    with open(path, "rb") as reader:
        try:
            parser.ParseFile(reader)
        except expat.ExpatError as error:
            raise ValueError(f"{path}:{error.lineno}: bad XML: {expat.ErrorString(error.code)} "
                             f"(column {error.offset + 1})") from None


def read_articles(path):
    """The articles of an articles file, in file order.

    Returns:
      list of `Article`.

    Raises:
      ValueError: bad XML, an article without an id, a repeated id, an article in an article,
        or one without any text; names the file and line.
    """
    articles, seen = [], {}
    current = None  # [id, title, text chunks, line] of the open article

    def start(parser, name, attrs):
        nonlocal current
        line = parser.CurrentLineNumber
        if name != "article":
            if current:
                current[2].append(" ")  # a tag separates words (see the module's docstring)
            return
        if current:
            raise ValueError(f"{path}:{line}: an <article> inside article {current[0]}")
        if not attrs.get("id"):
            raise ValueError(f"{path}:{line}: an <article> without an id")
        if attrs["id"] in seen:
            raise ValueError(f"{path}:{line}: article {attrs['id']} again (first at line "
                             f"{seen[attrs['id']]})")
        seen[attrs["id"]] = line
        current = [attrs["id"], attrs.get("title", ""), [], line]

    def end(parser, name):
        nonlocal current
        if current is None:
            return
        if name != "article":
            current[2].append(" ")
            return
        article_id, title, chunks, line = current
        text = " ".join(f"{title} {html.unescape(''.join(chunks))}".split())
        if not text:
            raise ValueError(f"{path}:{line}: article {article_id} has neither title nor text")
        articles.append(Article(article_id, text, f"{path}:{line}"))
        current = None

    def data(chunk):
        if current:
            current[2].append(chunk)
    _parse(path, start, end, data)
    return articles


def read_truth(path):
    """{article id: "true" or "false"} of a ground-truth file.

    Raises:
      ValueError: bad XML, an article without an id, a repeated id, or a label other than
        true/false; names the file and line.
    """
    truth, seen = {}, {}

    def start(parser, name, attrs):
        if name != "article":
            return
        line = parser.CurrentLineNumber
        article_id, label = attrs.get("id"), attrs.get("hyperpartisan")
        if not article_id:
            raise ValueError(f"{path}:{line}: an <article> without an id")
        if article_id in seen:
            raise ValueError(f"{path}:{line}: article {article_id} again (first at line "
                             f"{seen[article_id]})")
        if label not in LABELS:
            raise ValueError(f"{path}:{line}: hyperpartisan={label!r} for article "
                             f"{article_id}; expected 'true' or 'false'")
        seen[article_id] = line
        truth[article_id] = label
    _parse(path, start)
    return truth
