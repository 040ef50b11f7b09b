"""Commit metadata keys that more than one service reads."""

from __future__ import annotations

# Commits made before a commit's committer was always the acting user: the REST API's were
# recorded as by its own service user, with the user it acted for under this key (and a gRPC
# caller naming someone else got that name here, labelled). Nothing writes it any more and
# graveler strips it from caller metadata; readers still honour it on old commits.
REQUESTED_COMMITTER_KEY = "silt.requested-committer"
