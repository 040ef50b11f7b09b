"""A PUT whose bytes were written but could not be staged (graveler down) leaves no object
behind in the block store: the gateway deletes what no entry will ever refer to."""

from __future__ import annotations

from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from tests.support.gateway_stack import gateway_stack


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


def test_unstaged_put_leaves_no_bytes(tmp_path: Path) -> None:
    with gateway_stack(tmp_path / "data") as stack:
        s3 = stack.client(retries={"total_max_attempts": 1})  # each failure seen, not retried
        s3.create_bucket(Bucket="orphans")
        # Caches the repository's namespace and branch in the gateway, so the next PUTs get
        # as far as writing their bytes before they need graveler.
        s3.put_object(Bucket="orphans", Key="main/first", Body=b"kept")
        store = tmp_path / "data" / "data"
        before = _files(store)
        assert before, f"no object files under {store}"

        upload = s3.create_multipart_upload(Bucket="orphans", Key="main/multi")["UploadId"]
        part = s3.upload_part(Bucket="orphans", Key="main/multi", UploadId=upload, PartNumber=1, Body=b"p" * 1000)
        before = _files(store) - _files(store / "orphans" / "data" / ".silt-uploads")  # parts are consumed

        stack.stack.kill("graveler")  # no restart: this stack does not monitor its services
        with pytest.raises(ClientError) as failed:
            s3.complete_multipart_upload(
                Bucket="orphans",
                Key="main/multi",
                UploadId=upload,
                MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
            )
        assert failed.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
        for i in range(3):
            with pytest.raises(ClientError) as failed:
                s3.put_object(Bucket="orphans", Key=f"main/lost-{i}", Body=b"x" * 100_000)
            assert failed.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503

        left = sorted(str(p.relative_to(store)) for p in _files(store) - before)
        assert left == [], f"bytes without an entry: {left}"
