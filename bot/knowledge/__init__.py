"""Vectors, embedders and message retrieval: the indexes over what MongoDB holds."""
