"""Bringing a lakeFS repository across with its history (`silt migrate lakefs`, docs/migrating-from-lakefs.md)."""
