"""Test adapter package for apex-bench: good, unavailable, broken and misbehaving plugins."""
