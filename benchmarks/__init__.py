"""Benchmarks of softmax_scale, one module per topic; ``python -m benchmarks`` runs them all."""
