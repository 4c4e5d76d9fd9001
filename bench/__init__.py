"""Benchmarks; run them as modules from the repository root: python -m bench.NAME."""
