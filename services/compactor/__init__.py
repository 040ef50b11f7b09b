"""The staging-compaction Sensor and Compactor (seed 004)."""
