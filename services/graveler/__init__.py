"""Graveler's gRPC service: the engine (engine/) served over gRPC, with its permissions, sensor and journaling."""
