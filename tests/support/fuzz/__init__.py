"""The harness of the gateway fuzzer (tests/e2e/gateway/test_fuzz.py): the target and
its checks, recipes rendered to bytes, the hypothesis strategies that draw them, and the search."""
