"""Speed and learning-signal scripts (``python3 -m benchmarks.<name>``)."""
