"""The edge process: the S3 gateway, the REST API and the web UI on one HTTP port.

* core/: what every front end reaches the rest of Silt through: graveler's and auth's clients
  (client.py), staging writes batched per branch (stage_batching.py) and what a failed write
  certainly did not apply (write_outcome.py), request bodies, and the ASGI dispatcher and HTTP
  server the front ends share;
* gateway/ (S3), api/ (lakeFS's REST API), ui/ (the web UI): each maps its protocol onto the core,
  and none imports another (pyproject.toml's import contracts);
* app.py and server.py: the one place that composes them into the process.
"""
