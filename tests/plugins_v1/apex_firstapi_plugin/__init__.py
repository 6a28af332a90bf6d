"""A plugin package written against apex-bench's first plugin API (1.0); frozen: never edit it."""
