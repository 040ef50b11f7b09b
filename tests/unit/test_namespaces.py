"""Storage namespaces as Silt compares them (silt/namespaces.py): canonical, below a root, overlapping."""

from __future__ import annotations

import pytest

from silt.config import Config
from silt.errors import ConfigError, InvalidArgument
from silt.namespaces import parse_namespace, parse_recorded, parse_root, split_store_uri, within_roots

ROOTS = (parse_root("local://"), parse_root("s3://lake/silt/"))


@pytest.mark.parametrize(
    ("uri", "canonical"),
    [
        ("local://repo", "local://repo"),
        ("LOCAL://repo/", "local://repo"),
        # The file-URL spelling (no authority), what lakeFS clients build from the prefix "local://".
        ("local:///repo", "local://repo"),
        ("s3://lake/silt/repo", "s3://lake/silt/repo"),
        ("S3://lake/silt/repo/", "s3://lake/silt/repo"),
    ],
)
def test_spellings_of_one_place_are_one_namespace(uri: str, canonical: str) -> None:
    assert str(parse_namespace(uri)) == canonical


@pytest.mark.parametrize(
    "uri",
    [
        "",
        "repo",  # no scheme
        "local://",  # the whole store is a root, never a namespace
        "s3://lake/silt/../other",  # walks out of the root
        "s3://lake/silt/./repo",
        "s3://lake//silt/repo",  # an empty segment an adapter may collapse
        "local://repo//x",
        "local:////repo",
        "s3:///lake/repo",  # no bucket
        "local://repo\\..\\x",
        "local://repo/\x00",
        "local://repo/a\nb",
        "local://.silt-uploads/x",  # the local adapter's own files
        "s3://LAKE/silt/repo",  # bucket names are lowercase: no case spelling names another bucket
        "s3://a/x",  # not a bucket name
        "local://" + "x" * 600,
    ],
)
def test_namespaces_that_could_name_another_place_are_refused(uri: str) -> None:
    with pytest.raises(InvalidArgument):
        parse_namespace(uri)


@pytest.mark.parametrize(
    ("uri", "inside"),
    [
        ("local://repo", True),
        ("s3://lake/silt/repo", True),
        ("s3://lake/silt", False),  # the root itself is for many repositories
        ("s3://lake/silt-private/repo", False),  # merely starts with the root's text
        ("s3://lake/other/repo", False),
        ("s3://other-bucket/silt/repo", False),
    ],
)
def test_a_namespace_must_lie_strictly_below_a_root(uri: str, inside: bool) -> None:
    assert within_roots(parse_namespace(uri), ROOTS) is inside


@pytest.mark.parametrize(
    ("first", "second", "overlap"),
    [
        ("local://a", "local://a", True),
        ("local://a", "local://a/b", True),
        ("local://a/b", "local://a", True),
        ("local://a", "LOCAL://A/", True),  # case-folding stores see one place
        ("local://a", "local://ab", False),
        ("local://a/b", "local://a/c", False),
        ("local://a", "s3://aaa/a", False),
    ],
)
def test_overlap_is_equal_parent_or_child(first: str, second: str, overlap: bool) -> None:
    assert parse_recorded(first).overlaps(parse_recorded(second)) is overlap


def test_roots_are_checked_when_the_configuration_is_read() -> None:
    Config.model_validate({"graveler": {"allowed_namespace_roots": ["local://", "s3://lake/silt/"]}})
    for bad in ("s3://lake/../x", "lake", "s3://LAKE/"):
        with pytest.raises((ConfigError, ValueError), match="namespace root"):
            Config.model_validate({"graveler": {"allowed_namespace_roots": [bad]}})


def test_an_import_prefix_inside_a_root_is_refused_at_start() -> None:
    from engine.open import namespace_roots

    config = Config.model_validate(
        {"graveler": {"allowed_namespace_roots": ["s3://lake/silt/"], "allowed_import_prefixes": ["s3://lake/"]}}
    )
    with pytest.raises(ConfigError, match="allowed_import_prefixes"):
        namespace_roots(config)


def test_default_roots_follow_the_blockstore() -> None:
    from engine.open import namespace_roots

    assert namespace_roots(Config.model_validate({})) == ("local://",)
    assert namespace_roots(Config.model_validate({"blockstore": {"type": "s3"}})) == ()


@pytest.mark.parametrize(
    "uri",
    [
        "gs://lake-bucket/repos/one",
        "gs://lake_bucket",
        "https://account.blob.core.windows.net/container/repo",
        "https://account.blob.core.chinacloudapi.cn/container",
        "http://127.0.0.1:10000/devstoreaccount1/container/repo",
    ],
)
def test_gcs_and_azure_namespaces_parse(uri: str) -> None:
    assert str(parse_namespace(uri)) == uri


@pytest.mark.parametrize(
    ("uri", "problem"),
    [
        ("gs://Lake", "bucket name"),
        ("gs://-lake", "bucket name"),
        ("https://account.blob.core.windows.net", "expected https://"),
        ("https://account.blob.core.windows.net/", "expected https://"),
        ("https://account.blob.core.windows.net/Container", "container name"),
        ("https://account.blob.core.windows.net/a--b", "container name"),
        ("http://127.0.0.1:10000/devstoreaccount1", "expected https://"),
        ("https://Account.blob.core.windows.net/c1c", "lowercase host"),
        ("https://account.blob.core.windows.net/c1c/../x", "relative path"),
        ("https://account.blob.core.windows.net/c1c/victim.", "ends with a dot"),
        ("http://127.0.0.1:10000/devstoreaccount1/c1c/a./b", "ends with a dot"),
    ],
)
def test_bad_gcs_and_azure_namespaces_are_refused(uri: str, problem: str) -> None:
    with pytest.raises(InvalidArgument, match=problem):
        parse_namespace(uri)


@pytest.mark.parametrize(
    ("uri", "root", "key"),
    [
        ("gs://b/x/y", "gs://b", "x/y"),
        ("s3://b/k", "s3://b", "k"),
        ("local:///abs/path", "local://", "abs/path"),
        ("local://ns/data/x", "local://ns", "data/x"),
        ("https://a.blob.core.windows.net/c/x/y", "https://a.blob.core.windows.net/c", "x/y"),
        ("http://127.0.0.1:10000/acct/c/x", "http://127.0.0.1:10000/acct/c", "x"),
    ],
)
def test_an_objects_uri_splits_at_its_bucket_or_container(uri: str, root: str, key: str) -> None:
    assert split_store_uri(uri) == (root, key)


def test_gcs_and_azure_have_no_default_root() -> None:
    from engine.open import namespace_roots

    for kind in ("gs", "azure"):
        assert namespace_roots(Config.model_validate({"blockstore": {"type": kind}})) == ()
