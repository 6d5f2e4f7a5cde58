"""Kernel benchmarks (DeepBench's building blocks): one module per kernel."""
