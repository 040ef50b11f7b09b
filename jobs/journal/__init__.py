"""PySpark jobs over the metadata journal."""
