"""Evaluation: per-question cost records, retrieval-only evaluation, and the QA runner behind `eval.py`."""
