"""The metadata journal: every graveler KV mutation recorded beside it (docs/design/journal.md)."""
