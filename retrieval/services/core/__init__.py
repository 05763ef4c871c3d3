"""The shared vocabulary every search layer speaks.

Filters, traces, fusion, legs, databases and chunk headers. Nothing here
imports the search workflow (``services/query``) or anything above it;
``tests/test_layers.py`` holds the order.
"""
