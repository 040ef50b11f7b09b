"""The sample repository's Parquet table is shipped prebuilt (creating a sample must not import
pyarrow): it must hold what the module's orders are."""

from __future__ import annotations

import io

import pyarrow.parquet as pq

from edge.api.sample.files import ORDERS_PARQUET, orders_parquet, sample_steps


def test_the_shipped_orders_are_the_orders_built_from_the_module() -> None:
    shipped = pq.read_table(io.BytesIO(ORDERS_PARQUET.read_bytes()))
    built = pq.read_table(io.BytesIO(orders_parquet()))
    assert shipped.schema == built.schema
    assert shipped.to_pylist() == built.to_pylist()
    assert shipped.num_rows == 5


def test_the_sample_steps_carry_the_shipped_file() -> None:
    files = {file.path: file.data for step in sample_steps("main") for file in step.files}
    assert files["tables/orders.parquet"] == ORDERS_PARQUET.read_bytes()
