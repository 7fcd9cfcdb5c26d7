"""The runtime: one message in, a reply out, and learning afterwards."""
