"""Plugins: the API they are written against, their services, loading and host."""
