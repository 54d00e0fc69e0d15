"""Evaluators the sidecar runs on a share of the samples: an LLM judge (G-Eval style), answer
relevancy (prompt/response embedding cosine) and a refusal detector."""
