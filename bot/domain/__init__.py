"""The domain: what Mnemo stores and passes between adapters, runtime and plugins."""
