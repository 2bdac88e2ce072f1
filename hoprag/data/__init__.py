"""Datasets: official question formats, corpora and auxiliary files, all as `QAExample` / `Passage`."""

from hoprag.data.corpus import (
    iter_corpus,
    make_passage,
    passage_id,
    pool_corpus,
    read_corpus,
    unquote_title,
    write_corpus,
)
from hoprag.data.dataset import QADataset
from hoprag.data.fetch import ensure_file
from hoprag.data.flashrag import to_flashrag, write_flashrag
from hoprag.data.loading import FORMATS, detect_format, load_questions
from hoprag.data.nli import LABELS as NLI_LABELS
from hoprag.data.nli import NLIPair, load_nli
from hoprag.data.ranking import load_ranking
from hoprag.data.records import DataFormatError
from hoprag.data.types import Hop, Passage, QAExample

__all__ = [
    "FORMATS",
    "NLI_LABELS",
    "DataFormatError",
    "Hop",
    "NLIPair",
    "Passage",
    "QADataset",
    "QAExample",
    "detect_format",
    "ensure_file",
    "iter_corpus",
    "load_nli",
    "load_questions",
    "load_ranking",
    "make_passage",
    "passage_id",
    "pool_corpus",
    "read_corpus",
    "to_flashrag",
    "unquote_title",
    "write_corpus",
    "write_flashrag",
]
