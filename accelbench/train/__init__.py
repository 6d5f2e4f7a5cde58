"""Training throughput: samples per second of a model on synthetic data (tf_cnn_benchmarks parity)."""
