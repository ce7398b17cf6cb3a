"""Serving's model: the weights' layout, a LeaderWorkerSet's rollout, what runs now (pure)."""
