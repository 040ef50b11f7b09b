"""The executors' adapter cache (jobs/executor_adapters.py)."""

from __future__ import annotations

import pickle

from pydantic import SecretStr

from jobs import executor_adapters
from jobs.executor_adapters import MAX_ADAPTERS, executor_adapter
from silt.config import BlockstoreConfig


def _s3(secret: str, endpoint: str = "http://127.0.0.1:9", **more: object) -> BlockstoreConfig:
    return BlockstoreConfig.model_validate(
        {
            "type": "s3",
            "s3": {
                "endpoint_url": endpoint,
                "credentials": {"access_key_id": "AKIA", "secret_access_key": secret},
                **more,
            },
        }
    )


def test_one_adapter_per_configuration_in_a_worker() -> None:
    first = executor_adapter(_s3("one"))
    # Every task unpickles its own copy of the configuration: equal copies share the adapter.
    assert executor_adapter(pickle.loads(pickle.dumps(_s3("one")))) is first
    # Equal values given another way (a default spelled out) pickle to other bytes, and are the
    # same configuration all the same.
    spelled_out = _s3("one", region="us-east-1")
    assert pickle.dumps(spelled_out) != pickle.dumps(_s3("one"))
    assert executor_adapter(spelled_out) is first
    # Other credentials, or another endpoint, are another adapter: never one built for others.
    assert executor_adapter(_s3("two")) is not first
    assert executor_adapter(_s3("one", "http://127.0.0.1:10")) is not first


def test_the_cache_is_bounded() -> None:
    for n in range(MAX_ADAPTERS + 3):
        executor_adapter(_s3(f"secret-{n}"))
    assert len(executor_adapters._adapters) == MAX_ADAPTERS


def test_a_configuration_changed_after_use_does_not_change_the_cached_one() -> None:
    blockstore = _s3("before")
    first = executor_adapter(blockstore)
    blockstore.s3.credentials.secret_access_key = SecretStr("after")
    assert executor_adapter(blockstore) is not first
    assert executor_adapter(_s3("before")) is first
