"""edge/api/iceberg/routes.py: how a catalog name becomes a repository, a ref and keys."""

from __future__ import annotations

import pytest

from edge.api.iceberg.errors import IcebergError
from edge.api.iceberg.routes import _names, _parse_namespace, _served, _where
from edge.api.iceberg.store import Where, metadata_location, pointer_to


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
    # A branch: the ref-neutral form, whichever form was stored.
    for stored in ("s3://repo/main/db/t", "s3://repo/@main/db/t"):
        assert _served(where, {"location": stored}, branch=True)["location"] == "s3://repo/@dev/db/t"
        # A tag or a commit: through the ref, read-only.
        assert _served(where, {"location": stored}, branch=False)["location"] == "s3://repo/dev/db/t"
    assert _served(where, {"location": "s3://other/main/db/t"}, branch=True)["location"] == "s3://other/main/db/t"


def test_a_pointer_names_a_ref_neutral_metadata_file_only_of_its_own_key() -> None:
    where = Where("repo", "main", ("db",))
    key = "db/t/metadata/00001-u.metadata.json"
    assert metadata_location(where, pointer_to(Where("repo", "b1", ("db",)), key), key) == f"s3://repo/@b1/{key}"
    assert metadata_location(where, {"metadata-key": key}, key) == f"s3://repo/main/{key}"
    for forged in (f"s3://other/@b1/{key}", f"s3://repo/@b1/elsewhere/{key}", f"http://repo/@b1/{key}", 7):
        assert (
            metadata_location(where, {"metadata-key": key, "metadata-location": forged}, key) == f"s3://repo/main/{key}"
        )
