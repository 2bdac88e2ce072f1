"""The knowledge sources PruningRAG prunes at a fine grain (spec/pruningrag.md §6): web pages (§6.1), the
CRAG mock APIs (§6.2), and a question's own table or paragraphs (TAT-QA)."""

from hoprag.routers.sources.api import APISource
from hoprag.routers.sources.base import ContextSource, ParametricSource, Source
from hoprag.routers.sources.web import WebSource, format_references, html_to_markdown, split_text, token_counter

__all__ = [
    "APISource",
    "ContextSource",
    "ParametricSource",
    "Source",
    "WebSource",
    "format_references",
    "html_to_markdown",
    "split_text",
    "token_counter",
]
