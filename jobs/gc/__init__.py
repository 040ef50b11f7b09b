"""Offline garbage collection of unreachable objects (docs/design/gc.md)."""
