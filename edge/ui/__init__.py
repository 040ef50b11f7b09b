"""The web UI: serves the single-page app built from webui/ under /ui/ (docs/design/ui.md)."""
