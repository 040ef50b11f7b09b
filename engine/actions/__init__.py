"""lakeFS Actions: hooks that run on repository events (docs/design/actions.md)."""
