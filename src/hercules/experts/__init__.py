"""Expert baselines: for a computation a maintained library implements, that library's kernel."""
