"""Where a serving run's requests come from, one module a source: a prompts file, shared prefixes, a trace,
conversations, MLPerf's data sets. The seam they share is :mod:`.base`; random token ids are :mod:`.random_tokens`."""
