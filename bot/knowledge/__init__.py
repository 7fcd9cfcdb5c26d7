"""What Mnemo knows: the facts policy, vectors, retrieval and the embedders."""
