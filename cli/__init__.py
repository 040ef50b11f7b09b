"""The `silt` command."""
