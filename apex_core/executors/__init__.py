"""Executors that run a plan's cells somewhere other than this host's worker processes (Ray)."""
