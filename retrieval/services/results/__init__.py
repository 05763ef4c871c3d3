"""What a reader sees of a search: results grouped by document, snippets, facets, clicks."""
