"""Conformance tooling: inference_diff and the delegate conformance suite."""
