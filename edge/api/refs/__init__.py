"""Named refs: paged listings of branches and tags with lakeFS's `prefix` (listing.py), and what
merge, revert and cherry-pick share (merge.py)."""
