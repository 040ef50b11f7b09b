"""Diff summaries: a whole diff aggregated at every folder level (tree.py), read from graveler and
cached between commits (summary.py)."""
