"""The semantic model: per-file indexes, the project index, shared analyses."""
