"""The versioning engine as a library: repositories, branches, commits, staging and what is built
on them, for every process that versions data (graveler, the compactor, the edge's reads, jobs).

Its layers, each importing only those below it (pyproject.toml's import contracts):

* open.py: the one place an engine is constructed, by role (open_engine);
* graveler.py (the facade over everything), reads.py (the reader flows alone, for a process
  beside graveler), metered.py (the commit builder's metrics);
* actions/: hooks (lakeFS Actions) and pull-request checks, the core's Hooks protocol made real;
* features/: branch protection, pull requests, repositories' lifecycle, retention, last access,
  imports and history events;
* core/: refs, staging, the committed layer, entries, commits, branching, the branch updater and
  compaction; core/hooks.py is the protocol through which the core and the features fire hooks
  without knowing what runs them.

The gRPC service over it lives in services/graveler/.
"""
