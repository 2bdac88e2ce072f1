"""PruningRAG's mock-API knowledge source over the official CRAG mock API server (spec/pruningrag.md §6.2)."""

from hoprag.sources.api.client import MockAPIClient, MockAPIError
from hoprag.sources.api.source import APISource, APITrace

__all__ = ["APISource", "APITrace", "MockAPIClient", "MockAPIError"]
