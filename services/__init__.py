"""Silt services, each its own process talking gRPC."""
