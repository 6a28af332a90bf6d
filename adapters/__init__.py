"""Built-in backends, registered through the ``apex_bench.backends`` entry-point group."""
