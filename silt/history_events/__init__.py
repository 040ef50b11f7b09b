"""History events: a lossy, per-branch stream of reads, writes, deletes and ref changes
(docs/design/journal.md, "History events"). Shared by graveler, which stores and serves them,
the gateway and REST API, which emit them, and jobs, which read them."""
