"""Observability shared by every Silt process: OpenTelemetry traces (tracing.py), Prometheus
metrics (metrics.py), request ids in logs (requestid.py), gRPC interceptors (rpc.py), KV and
block-store instrumentation (kv.py, block.py) and health checks (health.py).

A process calls ``silt.telemetry.setup.setup(config, service)`` once, before it opens stores
or channels; what it builds afterwards is instrumented as the configuration asks. With
everything off (the default) nothing is wrapped, so hot paths pay nothing. Submodules are
imported on use: a CLI command that only logs never loads the OpenTelemetry SDK.
"""
