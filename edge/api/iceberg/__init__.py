"""The Apache Iceberg REST catalog at /iceberg/api, a part of the REST API's app: namespaces and
tables kept as objects on a repository's branches (store.py), so that branching, diff, commit and
merge see them; table metadata changed by the spec's requirements and updates (metadata.py)."""
