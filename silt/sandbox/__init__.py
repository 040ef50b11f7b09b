"""Child processes that run untrusted work for a service: started with a minimal environment,
limited, not dumpable, and killed on a wall clock (process.py)."""
