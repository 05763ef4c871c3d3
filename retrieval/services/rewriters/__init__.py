"""Query rewriters (``RETRIEVAL["REWRITERS"]``): a query in, the queries to retrieve with out."""
