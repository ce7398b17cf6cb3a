"""The configuration: every key's model, its checks and its reference (pure)."""
