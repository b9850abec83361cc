"""modeling/data/hyperpartisan.py and its processor: the XML files, the markup, the split."""
import collections
import html
import re
from xml.parsers import expat

import pytest

from modeling.data import classifier, hyperpartisan

ARTICLES = """<?xml version="1.0" encoding="UTF-8"?><articles>
  <article id="0000001" published-at="2017-09-10" title="Walls &amp; money">
From flickr.com <p>The <a href="https://x.org/?a=1&amp;b=2" type="external">walls</a>are
closing in.</p> <p>Said <q>nobody</q>, S&amp;amp;P &amp;gt; 5.</p>
  </article>
  <article id="0000002" title="">  <p>Short.</p></article>
</articles>
"""
TRUTH = """<?xml version="1.0" ?>
<articles>
  <article hyperpartisan="true" id="0000001" labeled-by="article"/>
  <article hyperpartisan="false" id="0000002" labeled-by="article"/>
</articles>
"""


def write(directory, articles=ARTICLES, truth=TRUTH):
    (directory / "articles-byarticle-2.xml").write_text(articles, "utf-8")
    (directory / "ground-truth-byarticle-2.xml").write_text(truth, "utf-8")
    return directory


def test_tags_become_spaces_entities_are_decoded_and_the_title_comes_first(tmp_path):
    articles = hyperpartisan.read_articles(write(tmp_path) / "articles-byarticle-2.xml")
    assert [(a.id, a.text) for a in articles] == [
        ("0000001", "Walls & money From flickr.com The walls are closing in. Said nobody , "
                    "S&P > 5."),
        ("0000002", "Short.")]
    assert articles[0].source.endswith("articles-byarticle-2.xml:2")
    assert articles[1].source.endswith("articles-byarticle-2.xml:6")
    assert hyperpartisan.read_truth(tmp_path / "ground-truth-byarticle-2.xml") == {
        "0000001": "true", "0000002": "false"}


@pytest.mark.parametrize("file, content, message", [
    ("articles", ARTICLES.replace("<q>nobody</q>", "<q>nobody"),
     r"articles-byarticle-2.xml:4: bad XML: mismatched tag"),
    ("articles", ARTICLES.replace("<p>Short.</p>", ""),
     r"articles-byarticle-2.xml:6: article 0000002 has neither title nor text"),
    ("articles", ARTICLES.replace('id="0000002"', 'id="0000001"'),
     r"articles-byarticle-2.xml:6: article 0000001 again \(first at line 2\)"),
    ("truth", TRUTH.replace('"false"', '"maybe"'),
     r"ground-truth-byarticle-2.xml:4: hyperpartisan='maybe' for article 0000002"),
    ("truth", TRUTH.replace('hyperpartisan="false" id="0000002"', 'id="0000003" '
                            'hyperpartisan="false"'),
     r"ground-truth-byarticle-2.xml: no hyperpartisan label for article 0000002 "
     r"\(.*articles-byarticle-2.xml:6\)"),
])
def test_bad_files_name_the_file_and_line(tmp_path, file, content, message):
    write(tmp_path, **{file: content})
    with pytest.raises(ValueError, match=message):
        classifier.get_processor("hyperpartisan").articles(str(tmp_path))


def test_a_missing_or_ambiguous_file_is_named(tmp_path):
    with pytest.raises(ValueError, match=r"must hold one articles-\*byarticle\*.xml file .* "
                                         r"found none"):
        classifier.get_processor("hyperpartisan").get_dev_examples(str(tmp_path))
    write(tmp_path)
    (tmp_path / "articles-byarticle-3.xml").write_text(ARTICLES, "utf-8")
    with pytest.raises(ValueError, match="found 2: articles-byarticle-2.xml, "
                                         "articles-byarticle-3.xml"):
        classifier.get_processor("hyperpartisan").get_dev_examples(str(tmp_path))


class FedInPieces:
    """An expat parser whose ParseFile feeds the file `size` bytes at a time: the parser then
    cuts the text at other places (it cuts at every piece's end)."""

    create = expat.ParserCreate  # the real one, before a test replaces it with this class

    def __init__(self, size):
        self.__dict__.update(parser=self.create("UTF-8"), size=size)

    def __getattr__(self, name):
        return getattr(self.parser, name)

    def __setattr__(self, name, value):
        setattr(self.parser, name, value)

    def ParseFile(self, reader):  # noqa: N802 (expat's name)
        while piece := reader.read(self.size):
            self.parser.Parse(piece, False)
        self.parser.Parse(b"", True)


@pytest.mark.parametrize("size", [1, 7, 4096])
def test_an_articles_text_does_not_depend_on_how_the_parser_is_fed(data, monkeypatch, size):
    path = data / "hyperpartisan/articles-byarticle-516.xml"
    whole = hyperpartisan.read_articles(path)
    monkeypatch.setattr(hyperpartisan.expat, "ParserCreate", lambda encoding: FedInPieces(size))
    assert hyperpartisan.read_articles(path) == whole


def test_the_real_articles_read_as_their_markup_says(data):
    """Against a reading by regular expressions: a tag is a space, the title's entities are
    decoded once and the text's twice (it is HTML escaped inside XML)."""
    path = data / "hyperpartisan/articles-byarticle-516.xml"
    articles = {article.id: article.text for article in hyperpartisan.read_articles(path)}
    expected = {}
    for match in re.finditer(r"<article ([^>]*)>(.*?)</article>", path.read_text("utf-8"),
                             re.S):
        attributes = dict(re.findall(r'(\S+)="([^"]*)"', match.group(1)))
        body = html.unescape(html.unescape(re.sub(r"<[^>]*>", " ", match.group(2))))
        expected[attributes["id"]] = " ".join(
            f"{html.unescape(attributes.get('title', ''))} {body}".split())
    assert len(articles) == 516 and articles == expected
    assert "geographically" in articles["0000004"].split()
    assert sum("S&P 500" in text for text in articles.values()) == 2
    assert not [text for text in articles.values() if re.search(r"&(amp|gt|lt|quot|#\d+);", text)]


def test_a_tag_inside_a_word_is_a_link_end_that_lost_its_space(data):
    """Why every tag is a space, block (`<p>`) or inline (`<a>`, `<q>`) alike: in the real file
    the only tags with letters on both sides are link ends, and all but one of those joints
    are two words whose space the scrape lost ("saying</a>that"), not a word cut by a link
    ("Israe</a>l", which reads "Israe l"). Reading inline tags as nothing would join the many
    to mend the one."""
    path = data / "hyperpartisan/articles-byarticle-516.xml"
    articles = {article.id: article.text for article in hyperpartisan.read_articles(path)}
    vocab = set((data.parent / "refs/vocab/uncased_vocab.txt").read_text("utf-8").split())
    joints, cut_words = collections.Counter(), []
    for match in re.finditer(r"<article id=\"(\d+)\"[^>]*>(.*?)</article>",
                             path.read_text("utf-8"), re.S):
        for joint in re.finditer(r"([A-Za-z]+)<(/?\w+)[^>]*>([A-Za-z]+)", match.group(2)):
            left, tag, right = joint.groups()
            joints[tag] += 1
            assert f"{left} {right}" in articles[match.group(1)]  # read as two words
            if (left + right).lower() in vocab and not {left.lower(), right.lower()} <= vocab:
                cut_words.append(left + right)
    assert set(joints) == {"/a"} and joints["/a"] >= 30, joints
    assert cut_words == ["Israel"]


def test_the_split_is_fixed_by_article_id():
    # Changing the rule changes these (sha256 of the salted id, modulo 10).
    assert [hyperpartisan.split_of(f"{i:07d}") for i in range(17)] == [
        "train", "test", "train", "train", "test", "train", "train", "train", "train", "train",
        "train", "train", "test", "train", "dev", "train", "test"]


def test_the_staged_articles_split_404_64_48(data):
    processor = classifier.get_processor("hyperpartisan")
    splits = processor.articles(str(data / "hyperpartisan"))
    counts = {split: collections.Counter(e.label for e in examples)
              for split, examples in splits.items()}
    assert counts == {"train": {"false": 254, "true": 150}, "dev": {"false": 38, "true": 26},
                      "test": {"false": 33, "true": 15}}
    assert not processor.is_pair and processor.get_labels() == ["false", "true"]
    test = processor.get_test_examples(str(data / "hyperpartisan"))
    assert [e.guid for e in test] == sorted(e.guid for e in test)  # dev and test in id order
    assert {e.label for e in test} == {None}
    train = [e.guid for e in splits["train"]]
    assert train != sorted(train)  # shuffled: the file's labels cluster by id
    assert train == sorted(train, key=hyperpartisan.shuffle_key)
