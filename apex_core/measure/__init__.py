"""Measurement: one cell in this process, its timers, checks, clocks and device facts."""
