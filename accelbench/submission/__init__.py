"""MLCommons submission trees."""
