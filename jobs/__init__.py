"""Spark pipelines, run through PySpark."""
