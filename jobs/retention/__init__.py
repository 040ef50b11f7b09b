"""Retention by last access on Spark (docs/design/gc.md, "Retention by last access")."""
