"""Where a storage namespace is for Spark, in one of three kinds:

* ``local``: a ``file:`` URI under the local blockstore's directory;
* ``s3``: an ``s3a:`` URI, plus the S3A settings it needs (``configure_s3a``);
* ``adapter``: no Hadoop file system reaches it here (Azure Blob Storage, GCS: this install
  has no wasb/abfs or gs connector), so the jobs move its Parquet through Silt's own block
  adapter, on the executors (jobs/gc/adapter_parquet.py).
"""

from __future__ import annotations

import contextlib
import io
import os
from dataclasses import dataclass, field
from typing import Any, Literal

from silt.block.registry import served_by
from silt.block.rules import split_key, split_namespace
from silt.config import BlockstoreConfig
from silt.spark import S3AEndpoint, use_endpoint_for_bucket

Kind = Literal["local", "s3", "adapter"]


@dataclass(frozen=True)
class NamespaceRoot:
    namespace: str  # as graveler knows it: local://name/prefix, s3://bucket/prefix, gs://..., https://...
    uri: str  # the same place for Hadoop: file:/abs/path or s3a://bucket/prefix; the namespace for "adapter"
    bucket: str | None  # set for S3
    kind: Kind
    # The blockstore whose adapter reaches an "adapter" namespace (executors open their own).
    blockstore: BlockstoreConfig | None = field(default=None, compare=False, repr=False)

    @property
    def through_adapter(self) -> bool:
        return self.kind == "adapter"

    def child(self, key: str) -> str:
        return f"{self.uri}/{key}"


def adapter_root(namespace: str, blockstore: BlockstoreConfig) -> NamespaceRoot:
    """The namespace reached through the block adapter, whatever its store (tests use it on a local one)."""
    return NamespaceRoot(namespace, namespace.rstrip("/"), None, "adapter", blockstore)


def namespace_root(namespace: str, blockstore: BlockstoreConfig) -> NamespaceRoot:
    """Where the namespace is for Spark; InvalidArgument for a scheme no block store serves
    (silt/block/registry.py) or one the configured blockstore does not."""
    store = served_by(namespace, blockstore.type, "garbage collection's storage namespace")
    if store.type == "local":
        name, prefix = split_namespace(namespace, "local")
        path = os.path.join(os.path.realpath(os.path.expanduser(blockstore.local.path)), name, *prefix)
        return NamespaceRoot(namespace, "file:" + path, None, "local")
    if store.type == "s3":
        bucket, prefix = split_namespace(namespace, "s3")
        return NamespaceRoot(namespace, "/".join([f"s3a://{bucket}", *prefix]), bucket, "s3")
    return adapter_root(namespace, blockstore)


def configure_s3a(spark: Any, root: NamespaceRoot, blockstore: BlockstoreConfig) -> None:
    """Point the session's S3A client for the namespace's bucket at the blockstore's S3 endpoint."""
    if root.bucket is None:
        return
    s3 = blockstore.s3
    key_id = s3.credentials.access_key_id
    secret = s3.credentials.secret_access_key
    if not s3.endpoint_url or key_id is None or secret is None:
        # Plain AWS: S3A's default credential chain and endpoint resolution apply.
        return
    use_endpoint_for_bucket(spark, root.bucket, S3AEndpoint(s3.endpoint_url, key_id, secret.get_secret_value()))


def write_small_file(spark: Any, root: NamespaceRoot, blockstore: BlockstoreConfig, key: str, data: bytes) -> None:
    """Write a small object (a run's summary) at `key` in the namespace, from the driver.

    On S3 it goes through the session's S3A file system, as the run's datasets do, rather than
    the block adapter: the driver then never imports boto3, which took 23 MiB of its peak
    memory. Elsewhere the block adapter writes it (on a local disk, Hadoop's would leave a
    checksum file beside it)."""
    split_key(key)  # as the adapter checks it: no `..`, empty or reserved part
    if root.kind != "s3":
        from silt.block import open_adapter

        open_adapter(blockstore).put(root.namespace, key, io.BytesIO(data), len(data))
        return
    context = spark.sparkContext
    path = context._jvm.org.apache.hadoop.fs.Path(root.child(key))
    stream = path.getFileSystem(context._jsc.hadoopConfiguration()).create(path, True)
    try:
        stream.write(data)
    except BaseException:
        # S3A uploads the object when its stream closes: a failed write must not publish what
        # it wrote so far over the previous object. abort() where the stream has it (S3A's,
        # from Hadoop 3.3); otherwise the stream is left unclosed, its buffer with it.
        with contextlib.suppress(Exception):
            stream.abort()
        raise
    stream.close()
