"""One rule per file; each carries its VALID and INVALID examples."""
