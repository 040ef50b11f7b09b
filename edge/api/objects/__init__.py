"""Objects through the REST API: upload bodies streamed to the store (body.py), writes staged as
the gateway's are (write.py), entries as lakeFS's ObjectStats rows and listings (stats.py,
listing.py), and presigned URLs with the physical addresses and signing key behind them
(presign.py, edge_urls.py, link_addresses.py, signing.py)."""
