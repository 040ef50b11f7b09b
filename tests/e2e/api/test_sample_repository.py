"""RepositoryCreation.sample_data: a repository with CSV and Parquet tables, a README, two
commits on its default branch and a branch with a change in an open pull request."""

from __future__ import annotations

import io
import json
import secrets

import lakefs_sdk
import pyarrow.parquet as pq
import urllib3
from pydantic import SecretStr

from silt.rpc.signing import Credentials
from tests.e2e.api.conftest import Api, error_message, json_post


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


def test_sample_data_needs_write_rights_before_anything_is_created(api: Api, client: lakefs_sdk.ApiClient) -> None:
    tag = secrets.token_hex(4)
    auth = lakefs_sdk.AuthApi(client)
    user, policy = f"creator-{tag}", f"create-only-{tag}"
    statement = lakefs_sdk.Statement(effect="allow", action=["CreateRepo", "ReadRepo"], resource=f"c-{tag}-*")
    auth.create_policy(lakefs_sdk.Policy(id=policy, statement=[statement]))
    auth.create_user(lakefs_sdk.UserCreation(id=user))
    auth.attach_policy_to_user(user, policy)
    issued = auth.create_credentials(user)
    creds = Credentials(issued.access_key_id, SecretStr(issued.secret_access_key))
    name = f"c-{tag}-sample"
    refused = json_post(api, "/repositories", {"name": name, "sample_data": True}, creds)
    assert "WriteRepo" in error_message(refused, 403)
    assert api.request("GET", f"/repositories/{name}").status == 404
    bare = api.request(
        "POST",
        "/repositories?bare=true",
        body=json.dumps({"name": f"c-{tag}-bare", "sample_data": True}).encode(),
        headers={**urllib3.make_headers(basic_auth=_basic(api)), "Content-Type": "application/json"},
    )
    assert "bare" in error_message(bare, 400)


def _basic(api: Api) -> str:
    admin = api.stack.admin
    return f"{admin.access_key_id}:{admin.secret_access_key.get_secret_value()}"
