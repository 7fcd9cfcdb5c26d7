"""Storage: MongoDB documents (the source of truth) and Chroma vectors (rebuildable)."""
