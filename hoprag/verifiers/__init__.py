"""NLI verifiers: `Verifier(pairs) -> [NLIScores(entailment, neutral, contradiction)]`, cached per pair."""

from hoprag.verifiers.base import LABELS, NLIScores, ScriptedVerifier, Verifier
from hoprag.verifiers.cross_encoder import CrossEncoderVerifier

__all__ = ["LABELS", "CrossEncoderVerifier", "NLIScores", "ScriptedVerifier", "Verifier"]
