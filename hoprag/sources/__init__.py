"""The knowledge sources PruningRAG prunes at a fine grain (spec/pruningrag.md §6): web pages (§6.1), the
CRAG mock APIs (§6.2), a question's own table or paragraphs (TAT-QA), and the LLM's own knowledge (no
references). Which of them a question consults is the router's choice (`hoprag.routers`)."""

from hoprag.sources.api import APISource
from hoprag.sources.base import ContextSource, ParametricSource, Source
from hoprag.sources.web import WebSource, format_references, html_to_markdown, split_text, token_counter

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
