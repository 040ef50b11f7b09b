"""lakefs-sdk's models load without its client in the serving process (edge/server.py calls
load_models_alone before it imports the app), and the client is whole when asked for.

Each check runs in a fresh interpreter: the test process may have imported lakefs_sdk already, and
load_models_alone leaves an imported package as it is."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from importlib.metadata import version
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_rest_api_loads_the_models_and_none_of_the_client() -> None:
    out = _run(
        """
        import sys
        from edge.api.sdk_models import load_models_alone
        load_models_alone()
        import edge.api.app
        client = sorted(n for n in sys.modules if n.startswith(("lakefs_sdk.api", "lakefs_sdk.api_client")))
        print(client, "ObjectStats" in dir(sys.modules["lakefs_sdk.models"]))
        """
    )
    assert out == "[] True"


def test_the_client_asked_for_afterwards_is_whole_and_shares_the_model_classes() -> None:
    out = _run(
        """
        from edge.api.sdk_models import load_models_alone
        load_models_alone()
        from lakefs_sdk.models import ObjectStats
        import lakefs_sdk
        from lakefs_sdk import Configuration
        from lakefs_sdk.api.objects_api import ObjectsApi
        client = lakefs_sdk.ApiClient(Configuration(host="http://127.0.0.1:1/api/v1"))
        print(
            lakefs_sdk.__version__,
            lakefs_sdk.ObjectStats is ObjectStats,
            lakefs_sdk.ObjectsApi is ObjectsApi,
            type(ObjectsApi(client).api_client).__name__,
            hasattr(lakefs_sdk, "__getattr__"),
        )
        """
    )
    assert out == f"{version('lakefs-sdk')} True True ApiClient False"


def test_a_name_the_package_does_not_have_is_an_attribute_error() -> None:
    out = _run(
        """
        from edge.api.sdk_models import load_models_alone
        load_models_alone()
        import lakefs_sdk
        try:
            lakefs_sdk.NoSuchThing
        except AttributeError as error:
            print(type(error).__name__, "NoSuchThing" in str(error), lakefs_sdk.ObjectsApi.__name__)
        """
    )
    assert out == "AttributeError True ObjectsApi"


def test_a_client_imported_first_is_left_as_it_is() -> None:
    out = _run(
        """
        import lakefs_sdk
        before = __import__("sys").modules["lakefs_sdk"]
        from edge.api.sdk_models import load_models_alone
        load_models_alone()
        import sys
        print(sys.modules["lakefs_sdk"] is before, "lakefs_sdk.api" in sys.modules)
        """
    )
    assert out == "True True"


def test_importing_the_api_outside_the_serving_process_keeps_the_plain_package() -> None:
    """A test or tool that imports the REST API's modules and then a client module first gets
    lakefs-sdk as a plain import makes it."""
    out = _run(
        """
        import edge.api.app
        from lakefs_sdk.api_client import ApiClient
        from lakefs_sdk.api.objects_api import ObjectsApi
        import lakefs_sdk
        print(lakefs_sdk.ApiClient is ApiClient, hasattr(lakefs_sdk, "__getattr__"))
        """
    )
    assert out == "True False"
