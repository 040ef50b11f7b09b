"""lakeFS's installation-wide calls through lakefs-sdk: getLakeFSVersion, getStorageConfig and
getGarbageCollectionConfig (the pieces of /config), getAuthCapabilities, postStatsEvents and
getUsageReportSummary; who may call them and what they refuse."""

from __future__ import annotations

import json

import lakefs_sdk
import pytest
from lakefs_sdk.exceptions import ApiException

from silt.gc_grace import DEFAULT_GRACE_SECONDS
from tests.e2e.api.conftest import Api, error_message, json_post


def test_version_and_storage_are_those_of_config(api: Api, client: lakefs_sdk.ApiClient) -> None:
    internal = lakefs_sdk.InternalApi(api.sdk(api.stack.reader))  # any user may read them
    config = lakefs_sdk.ConfigApi(client).get_config()
    assert internal.get_lake_fs_version() == config.version_config
    assert internal.get_storage_config() == config.storage_config
    version = internal.get_lake_fs_version()
    assert version.version_context and "silt" in version.version_context
    assert version.latest_version is None and version.upgrade_recommended is None  # Silt asks nobody


def test_garbage_collection_grace_is_the_default_run_grace(api: Api) -> None:
    gc = lakefs_sdk.InternalApi(api.sdk(api.stack.reader)).get_garbage_collection_config()
    assert gc.grace_period == DEFAULT_GRACE_SECONDS


def test_auth_capabilities_are_public_and_say_what_silt_lacks(api: Api) -> None:
    response = api.request("GET", "/auth/capabilities", headers={})
    assert response.status == 200
    assert json.loads(response.data) == {"invite_user": False, "forgot_password": False}


def test_statistics_are_accepted_and_checked(api: Api, client: lakefs_sdk.ApiClient) -> None:
    internal = lakefs_sdk.InternalApi(client)
    events = [lakefs_sdk.StatsEvent(var_class="ui-event", name="page-view", count=3)]
    assert internal.post_stats_events(lakefs_sdk.StatsEventsList(events=events)) is None
    reader = api.stack.reader
    assert json_post(api, "/statistics", {"events": []}, reader).status == 204
    for event, problem in (
        ({"class": "", "name": "n", "count": 1}, "invalid value: class is required"),
        ({"class": "c", "name": "", "count": 1}, "invalid value: name is required"),
        ({"class": "c", "name": "n", "count": -1}, "invalid value: count must be a non-negative integer"),
    ):
        assert error_message(json_post(api, "/statistics", {"events": [event]}), 400) == problem
    assert "class" in error_message(json_post(api, "/statistics", {"events": [{"name": "n", "count": 1}]}), 400)
    many = {"events": [{"class": "c" * 100, "name": "n", "count": 1}] * 1000}
    assert error_message(json_post(api, "/statistics", many), 413)
    anonymous = api.request("POST", "/statistics", headers={"Content-Type": "application/json"}, body=b"{}")
    assert error_message(anonymous, 401)


def test_usage_report_is_not_kept(api: Api, client: lakefs_sdk.ApiClient) -> None:
    with pytest.raises(ApiException) as missing:
        lakefs_sdk.InternalApi(client).get_usage_report_summary()
    assert missing.value.status == 404
    assert "installation not found" in json.loads(missing.value.body or "{}")["message"]
    assert error_message(api.request("GET", "/usage-report/summary", headers={}), 401)
