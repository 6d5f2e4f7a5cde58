"""Inference under the real MLPerf LoadGen: scenarios, a batching system under test, log parsing."""
