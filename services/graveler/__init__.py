"""Graveler: the versioning engine (repositories, branches, commits, staging)."""
