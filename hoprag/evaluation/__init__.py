"""Evaluation: retrieval-only evaluation now; the QA runner, traces and cost records build on it."""
