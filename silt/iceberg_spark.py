"""Spark settings for Silt's Iceberg REST catalog: the catalog as lakeFS's documentation configures it for
lakeFS (so a lakeFS user's settings work unchanged), and the data files through Silt's S3 gateway.

The catalog serves table locations as `s3://<repository>/<ref>/...`. Iceberg's own S3 client (S3FileIO)
needs the AWS SDK v2 bundle, which no package we can install ships, so the files go through Hadoop's
FileSystem (HadoopFileIO) with the `s3` scheme mapped to the S3A connector, pointed at the gateway
exactly as for `s3a://` paths (silt/spark.py). The jars (Iceberg's Spark runtime for Spark 3.5 and
Scala 2.12, hadoop-aws and the AWS SDK v1 bundle) come from `.venv-iceberg-spark` (`make iceberg-spark`).
"""

from __future__ import annotations

from silt.spark import S3AEndpoint, s3a_hadoop_settings

ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"


def catalog_settings(catalog: str, target: S3AEndpoint, default: bool = True) -> dict[str, str]:
    """Every `spark.*` setting (jars aside) for a Spark catalog named `catalog` on Silt at `target`.

    The access key signs the catalog's requests (an OAuth2 client credential, as lakeFS takes it) and
    S3A's; `default` makes it the session's default catalog, so `USE repo.branch.ns` needs no prefix.
    """
    prefix = f"spark.sql.catalog.{catalog}"
    settings = {
        "spark.sql.extensions": ICEBERG_EXTENSIONS,
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.type": "rest",
        f"{prefix}.uri": f"{target.endpoint}/iceberg/api",
        f"{prefix}.oauth2-server-uri": f"{target.endpoint}/iceberg/api/v1/oauth/tokens",
        f"{prefix}.credential": f"{target.access_key_id}:{target.secret_access_key}",
        f"{prefix}.io-impl": "org.apache.iceberg.hadoop.HadoopFileIO",
    }
    if default:
        settings["spark.sql.defaultCatalog"] = catalog
    hadoop = s3a_hadoop_settings(target)
    settings.update({f"spark.hadoop.{key}": value for key, value in hadoop.items()})
    # The catalog's locations are s3://...: the same connector serves that scheme.
    settings["spark.hadoop.fs.s3.impl"] = hadoop["fs.s3a.impl"]
    return settings
