"""The knowledge graph: entities, their extraction from chunks, traversal for its retriever."""
