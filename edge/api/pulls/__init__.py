"""Pull requests and branch protection in lakeFS's shapes: graveler's pull requests, reviews and
comments as the API shows them (convert.py), lakeFS's protection rules over graveler's (protection.py)."""
