"""The command layer: one command set, the same on every surface."""
