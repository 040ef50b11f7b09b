"""The staging-compaction Sensor and Compactor (docs/design/compaction.md)."""
