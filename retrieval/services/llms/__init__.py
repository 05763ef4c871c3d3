"""Chat-completion language models (``RETRIEVAL["LLMS"]``)."""
