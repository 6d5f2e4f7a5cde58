"""Where a serving run's requests come from, one module a source: a prompts file, shared prefixes, a trace,
conversations, MLPerf's data sets. The seam they share, and random lengths, is :mod:`.base`."""
