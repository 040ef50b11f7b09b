"""edge/api/iceberg/routes.py: how a catalog name becomes a repository, a ref and keys."""

from __future__ import annotations

import pytest

from edge.api.iceberg.errors import IcebergError
from edge.api.iceberg.routes import _names, _parse_namespace, _served, _where
from edge.api.iceberg.store import Where


def test_absolute_names_start_with_the_repository_and_the_ref() -> None:
    where = _parse_namespace("", "repo\x1fdev\x1fsales\x1feu")
    assert where == Where("repo", "dev", ("sales", "eu"))
    assert where.key == "sales/eu/" and where.table_key("t") == "sales/eu/t/"
    assert _names(where, "") == ["repo", "dev", "sales", "eu"]
    # A prefix that is not <repository>.<ref> (lakeFS's `lakefs`) keeps names absolute.
    assert _parse_namespace("lakefs", "repo\x1fdev\x1fsales") == Where("repo", "dev", ("sales",))


def test_a_warehouse_prefix_fixes_the_repository_and_the_ref() -> None:
    where = _parse_namespace("repo.v1.2", "sales")
    assert where == Where("repo", "v1.2", ("sales",))
    assert _names(where, "repo.v1.2") == ["sales"]
    assert _where("repo.main", ()) == Where("repo", "main", ())


@pytest.mark.parametrize("levels", [("repo",), ("repo", "main", ""), ("repo", "main", "a/b"), ("r", "m", "_iceberg_x")])
def test_names_that_cannot_be_keys_are_bad_requests(levels: tuple[str, ...]) -> None:
    with pytest.raises(IcebergError) as refused:
        _where("", levels)
    assert refused.value.status == 400


def test_a_location_in_the_repository_is_served_on_the_ref_it_is_read_from() -> None:
    where = Where("repo", "dev", ("db",))
    assert _served(where, {"location": "s3://repo/main/db/t"})["location"] == "s3://repo/dev/db/t"
    assert _served(where, {"location": "s3://other/main/db/t"})["location"] == "s3://other/main/db/t"
