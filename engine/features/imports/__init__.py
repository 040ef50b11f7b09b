"""Zero-copy import (lakeFS's importStart/importStatus/importCancel): entries naming objects that
stay where they are, outside the repository's storage namespace, committed as one commit.

locations.py checks what an import may read; listing.py lists it in key order; ingest.py writes
the listing as a metarange (in a worker, runner.py); records.py keeps each import's status on KV;
manager.py starts, reports, cancels and commits. Reading an imported object back checks its source
is still as imported (silt/block/external.py). docs/import.md is the user's side of it.
"""
