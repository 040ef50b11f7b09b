"""The edge process: the S3 gateway, the REST API and the web UI on one HTTP port.

This package is the one place that knows all three: it sits above services/ (pyproject.toml's
import contracts), so each service stays ignorant of the others and gets nothing by name.
"""
