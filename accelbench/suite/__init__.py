"""Suites of benchmarks and the isolated runner that executes them."""
