"""The sample repository: what it holds (files.py) and how a new repository is filled with it (repo.py)."""
