"""Evaluation, baselines (Self-Refine), run comparison and refine-usage statistics."""
