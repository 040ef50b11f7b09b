"""The edge's core: what the S3 gateway, the REST API and the web UI reach graveler, auth and the
object store through (edge/__init__.py)."""
