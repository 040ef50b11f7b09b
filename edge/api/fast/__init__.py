"""The object routes' fast path: a raw-ASGI table derived from the app's own routes at start-up
(table.py) and the hot object routes answered through it before FastAPI's routing (objects.py).
Above routes/, whose functions it calls; below app.py, which mounts it."""
