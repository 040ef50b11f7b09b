"""lakeFS's pydantic models (lakefs_sdk.models) without lakefs-sdk's client.

The REST API answers in lakefs-sdk's own models, so that its shapes are lakeFS's. Imported the
usual way, they cost the whole client first: `lakefs_sdk/__init__.py` imports every generated
API class, and pydantic wraps each of their methods in a validator as it is defined. That was
about 0.75 s of CPU at every gateway start (a fifth to a quarter of it, `make bench-startup`),
for code no server calls.

`load_models_alone` puts the package in sys.modules without running its `__init__.py`, so that
`lakefs_sdk.models` and its submodules load alone. The first attribute anything asks of the
package itself (`ApiClient`, `Configuration`, `__version__`) runs `__init__.py` into the same
module, and from then on the package is what a plain import makes, with the same model classes.

Only the serving process calls it (edge/server.py), before it imports the app: nothing there
uses the client. A process that does (a test, a tool) keeps the plain package. There, a client
module imported first (`from lakefs_sdk.api_client import ApiClient`) would run `__init__.py`
from inside its own import, and the package's imports of that half-made module would fail.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from typing import Any

PACKAGE = "lakefs_sdk"
# Reentrant: running __init__.py reads the package's attributes on the same thread.
_completing = threading.RLock()


def load_models_alone() -> None:
    """Make `import lakefs_sdk.models` skip the client, unless lakefs_sdk is already imported."""
    with _completing:
        if PACKAGE in sys.modules:
            return
        spec = importlib.util.find_spec(PACKAGE)
        if spec is None or spec.loader is None:
            return  # not installed: the first import says so, as it would have
        package = importlib.util.module_from_spec(spec)
        loader = spec.loader
        completed = False

        def complete(name: str) -> Any:
            nonlocal completed
            with _completing:
                if not completed:
                    completed = True
                    try:
                        loader.exec_module(package)
                    except BaseException:
                        completed = False  # as a failed import: the next ask tries again
                        raise
                    if package.__dict__.get("__getattr__") is complete:
                        del package.__dict__["__getattr__"]
            try:
                return package.__dict__[name]
            except KeyError:
                raise AttributeError(f"module {PACKAGE!r} has no attribute {name!r}") from None

        # PEP 562: a module's __getattr__ is asked only for names it does not have.
        package.__dict__["__getattr__"] = complete
        sys.modules[PACKAGE] = package
