"""Running: cells in isolated workers, shards over devices, probes, builders, executors."""
