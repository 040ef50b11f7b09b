"""The harness of the gateway fuzzer (tests/integration/gateway/test_fuzz.py): the target and
its checks, recipes rendered to bytes, the hypothesis strategies that draw them, and the search."""
