"""The executors' adapter cache (jobs/executor_adapters.py)."""

from __future__ import annotations

import pickle

from jobs import executor_adapters
from jobs.executor_adapters import MAX_ADAPTERS, executor_adapter
from silt.config import BlockstoreConfig


def _s3(secret: str, endpoint: str = "http://127.0.0.1:9") -> BlockstoreConfig:
    return BlockstoreConfig.model_validate(
        {
            "type": "s3",
            "s3": {
                "endpoint_url": endpoint,
                "credentials": {"access_key_id": "AKIA", "secret_access_key": secret},
            },
        }
    )


def test_one_adapter_per_configuration_in_a_worker() -> None:
    first = executor_adapter(_s3("one"))
    # Every task unpickles its own copy of the configuration: equal copies share the adapter.
    assert executor_adapter(pickle.loads(pickle.dumps(_s3("one")))) is first
    # Other credentials, or another endpoint, are another adapter: never one built for others.
    assert executor_adapter(_s3("two")) is not first
    assert executor_adapter(_s3("one", "http://127.0.0.1:10")) is not first


def test_the_cache_is_bounded() -> None:
    for n in range(MAX_ADAPTERS + 3):
        executor_adapter(_s3(f"secret-{n}"))
    assert len(executor_adapters._adapters) == MAX_ADAPTERS
