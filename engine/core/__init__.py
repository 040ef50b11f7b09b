"""The engine's core: refs, staging, the committed ranges, and the flows over them (entries,
commits, branching, compaction), with the one set_if-and-retry loop on branch records (updater.py)."""
