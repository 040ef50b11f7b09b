"""What a sample repository holds (RepositoryCreation.sample_data): a small shop's tables as
CSV and Parquet and a README, in the steps they are committed, so a new user has history to
browse, a branch to compare and a pull request to review."""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# The branch with a change to review, and the pull request that proposes it.
REVIEW_BRANCH = "raise-prices"
PULL_TITLE = "Raise prices of the hardware category by 10%"

CSV = "text/csv"
MARKDOWN = "text/markdown"
PARQUET = "application/vnd.apache.parquet"

_PRODUCTS = [
    (1, "hammer", "hardware", 12.50),
    (2, "screwdriver", "hardware", 7.90),
    (3, "paint, white", "decor", 21.00),
    (4, "brush", "decor", 4.20),
    (5, "ladder", "hardware", 89.00),
    (6, "lamp", "decor", 35.00),
]
_CUSTOMERS = [
    (1, "Ada", "Lisbon"),
    (2, "Grace", "Oslo"),
    (3, "Linus", "Helsinki"),
    (4, "Margaret", "Boston"),
]
_ORDERS = [
    (1001, 1, 1, 2, "2024-03-01"),
    (1002, 2, 3, 1, "2024-03-02"),
    (1003, 3, 5, 1, "2024-03-02"),
    (1004, 1, 6, 3, "2024-03-04"),
    (1005, 4, 2, 5, "2024-03-05"),
]

README = """# Sample repository

A small shop's data, to try Silt on:

- `tables/customers.csv` and `tables/products.csv`: plain CSV;
- `tables/orders.parquet`: the orders, as Parquet (the web UI previews both);
- two commits on `main`, and the branch `{branch}` that changes `tables/products.csv`,
  proposed for review in an open pull request.

Open the pull request to see the change row by row, comment, approve and merge it.
Delete this repository whenever you like: it is only an example.
"""


@dataclass(frozen=True)
class SampleFile:
    path: str
    data: bytes
    content_type: str


@dataclass(frozen=True)
class SampleStep:
    """Files written to a branch, then committed with this message."""

    branch: str
    message: str
    files: tuple[SampleFile, ...]


def _csv(header: str, rows: Sequence[tuple[object, ...]]) -> bytes:
    lines = [header] + [",".join(f'"{v}"' if isinstance(v, str) and "," in v else str(v) for v in row) for row in rows]
    return ("\n".join(lines) + "\n").encode()


def _products(rise: float = 1.0) -> bytes:
    rows = [(i, name, cat, f"{price * rise if cat == 'hardware' else price:.2f}") for i, name, cat, price in _PRODUCTS]
    return _csv("id,name,category,price", rows)


# The orders as Parquet, written once by orders_parquet() and shipped beside this module:
# building them per request meant importing pyarrow, seconds on a cold machine, which made the
# first sample repository of a fresh server slow enough for its creator to give up.
ORDERS_PARQUET = Path(__file__).with_name("orders.parquet")


def orders_parquet() -> bytes:
    """The orders table as Parquet, as ORDERS_PARQUET holds it (tests/unit compares the two)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = list(zip(*_ORDERS, strict=True))
    table = pa.table(
        {
            "order_id": pa.array(columns[0], pa.int64()),
            "customer_id": pa.array(columns[1], pa.int64()),
            "product_id": pa.array(columns[2], pa.int64()),
            "quantity": pa.array(columns[3], pa.int32()),
            "ordered_on": pa.array(columns[4], pa.string()),
        }
    )
    out = io.BytesIO()
    pq.write_table(table, out)
    return out.getvalue()


def sample_steps(default_branch: str) -> list[SampleStep]:
    """The commits of a sample repository, in order; the first step on the review branch
    starts from the default branch's head at that point. Reads a file: run it off the loop."""
    readme = README.format(branch=REVIEW_BRANCH).encode()
    return [
        SampleStep(
            default_branch,
            "Add customers and products",
            (
                SampleFile("README.md", readme, MARKDOWN),
                SampleFile("tables/customers.csv", _csv("id,name,city", _CUSTOMERS), CSV),
                SampleFile("tables/products.csv", _products(), CSV),
            ),
        ),
        SampleStep(
            default_branch,
            "Add the orders of March",
            (SampleFile("tables/orders.parquet", ORDERS_PARQUET.read_bytes(), PARQUET),),
        ),
        SampleStep(
            REVIEW_BRANCH,
            PULL_TITLE,
            (SampleFile("tables/products.csv", _products(1.1), CSV),),
        ),
    ]
