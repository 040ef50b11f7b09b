"""RepositoryCreation.sample_data: a repository with CSV and Parquet tables, a README, two
commits on its default branch and a branch with a change in an open pull request."""

from __future__ import annotations

import io
import json
import secrets

import lakefs_sdk
import pyarrow.parquet as pq

from tests.integration.api.conftest import Api, json_post


def test_a_sample_repository_has_tables_history_and_a_change_to_review(api: Api, client: lakefs_sdk.ApiClient) -> None:
    name = f"sample-{secrets.token_hex(4)}"
    # No storage namespace: the server has a default root (lakefs-sdk's model insists on one).
    created = json_post(api, "/repositories", {"name": name, "sample_data": True})
    assert created.status == 201, created.data
    objects = lakefs_sdk.ObjectsApi(client)
    listed = objects.list_objects(name, "main")
    assert sorted(o.path for o in listed.results) == [
        "README.md",
        "tables/customers.csv",
        "tables/orders.parquet",
        "tables/products.csv",
    ]
    readme = bytes(objects.get_object(name, "main", "README.md")).decode()
    assert readme.startswith("# Sample repository")
    table = pq.read_table(io.BytesIO(bytes(objects.get_object(name, "main", "tables/orders.parquet"))))
    assert table.num_rows == 5 and "quantity" in table.column_names
    assert objects.stat_object(name, "main", "tables/products.csv").content_type == "text/csv"
    log = lakefs_sdk.RefsApi(client).log_commits(name, "main")
    assert [c.message for c in log.results] == [
        "Add the orders of March",
        "Add customers and products",
        "Repository created",
    ]
    diff = lakefs_sdk.RefsApi(client).diff_refs(name, "main", "raise-prices")
    assert [(d.path, d.type) for d in diff.results] == [("tables/products.csv", "changed")]
    changed = bytes(objects.get_object(name, "raise-prices", "tables/products.csv")).decode()
    assert "hammer,hardware,13.75" in changed
    pulls = api.request("GET", f"/repositories/{name}/pulls?status=open")
    assert pulls.status == 200
    [pull] = json.loads(pulls.data)["results"]
    assert (pull["source_branch"], pull["destination_branch"]) == ("raise-prices", "main")
