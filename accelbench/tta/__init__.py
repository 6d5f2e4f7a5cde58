"""Time to accuracy: train on real data until a quality target, over several seeds (MLPerf Training, DAWNBench)."""
