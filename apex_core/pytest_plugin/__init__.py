"""apex-bench inside a test suite: the ``apex_bench`` pytest fixture (docs/pytest.md)."""
