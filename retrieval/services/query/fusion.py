"""The import path the docs named before :mod:`retrieval.services.core.fusion` moved; kept
for code that calls ``rrf_fuse``."""

from retrieval.services.core.fusion import rrf_fuse

__all__ = ["rrf_fuse"]
