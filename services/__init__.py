"""Silt's gRPC services, each its own process: auth, graveler (the engine served) and the compactor."""
