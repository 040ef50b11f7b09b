"""Offline garbage collection of unreachable objects (seed 003)."""
