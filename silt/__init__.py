"""Silt: git-like version control for data lakes."""

__version__ = "0.1.0"
