"""Presigned URLs for the REST API (`presign=true` on getObject, statObject, listObjects and
getPhysicalAddress): the store's own where it has them (S3: boto3 signs them for
`blockstore.s3.pre_signed_endpoint` or the store's endpoint; Azure: SAS URLs; GCS: V4 signed
URLs), else the edge's own (objects/edge_urls.py) on the origin the client reached this server at. An
imported object, and an object a client uploaded to an address of getPhysicalAddress and linked,
is always read through the edge's own URL, which checks that it is still as imported or linked
(silt/block/external.py reads_pinned); the store's URL would serve whatever is there now, and
the store's presigned PUT URL can write there again until it expires.
Turned off by `blockstore.<type>.disable_pre_signed`: `presign=true` is then refused, as lakeFS
refuses it ("operation not supported").

Presigned multipart uploads (routes/presigned_multipart.py) get URLs for the parts the same way:
S3's own presigned UploadPart, the edge's own on the local store. Azure and GCS do not offer them:
Silt's Azure adapter names a part's block by the part's MD5, known only once the bytes arrived,
and its GCS adapter composes parts it wrote itself; neither store has a URL that uploads a part
a later complete can find.
"""

from __future__ import annotations

import re

from starlette.requests import Request

from edge.api.context import backend_of
from edge.api.errors import ApiError, bad_request
from edge.api.objects.edge_urls import EdgeUrls, UploadPartGrant
from edge.api.objects.link_addresses import LinkAddresses
from edge.api.objects.signing import edge_signing_key, purpose_key
from silt.block import BlockAdapter
from silt.block.adapter import PresignedURL, PresignMethod
from silt.block.external import SourceVersion, reads_pinned
from silt.config import Config, PreSignedConfig
from silt.graveler.v1 import model_pb2 as pb
from silt.objects import SOURCE_MTIME_KEY, SOURCE_VERSION_KEY, full_address, split_address

# What a Host header may hold to be put into a URL: a name or address and a port, nothing else.
_HOST = re.compile(r"[A-Za-z0-9._-]{1,253}(:[0-9]{1,5})?|\[[0-9A-Fa-f:.]{2,45}\](:[0-9]{1,5})?")
# The blockstores whose parts can be uploaded with a presigned URL (the module's docstring says why
# not the others).
PRESIGNED_MULTIPART_STORES = frozenset({"s3", "local"})


def presign_settings(config: Config) -> PreSignedConfig:
    """The presigned-URL settings of the configured blockstore."""
    blockstore = config.blockstore
    settings: PreSignedConfig = getattr(blockstore, blockstore.type)
    return settings


def presigned_multipart_offered(config: Config) -> bool:
    """Whether the blockstore offers presigned multipart uploads (`pre_sign_multipart_upload`)."""
    settings = presign_settings(config)
    if settings.disable_pre_signed or config.blockstore.type not in PRESIGNED_MULTIPART_STORES:
        return False
    return not getattr(settings, "disable_pre_signed_multipart", True)


class Presigner:
    def __init__(self, config: Config, adapter: BlockAdapter) -> None:
        self.settings = presign_settings(config)
        self._section = f"blockstore.{config.blockstore.type}"
        self._multipart = presigned_multipart_offered(config)
        self._adapter = adapter
        key = edge_signing_key(config)
        self.edge = EdgeUrls(purpose_key(key, "presigned-url"))
        self.links = LinkAddresses(purpose_key(key, "link-address"))

    @property
    def enabled(self) -> bool:
        return not self.settings.disable_pre_signed

    @property
    def enabled_for_ui(self) -> bool:
        return self.enabled and not self.settings.disable_pre_signed_ui

    @property
    def multipart_enabled(self) -> bool:
        """Whether presigned multipart uploads are offered (`pre_sign_multipart_upload` in /config)."""
        return self._multipart

    def check_multipart_enabled(self) -> None:
        if not self.multipart_enabled:
            # lakeFS's answer when its blockstore does not offer them.
            raise ApiError(501, "presign multipart upload API is not supported")

    def check_enabled(self) -> None:
        if not self.enabled:
            setting = f"{self._section}.disable_pre_signed"
            raise bad_request(f"operation not supported: presigned URLs are turned off ({setting})")

    def sign_read(self, request: Request, namespace: str, entry: pb.Entry, filename: str) -> PresignedURL:
        """A GET URL for an entry's bytes. Blocking (boto3 may read credentials the first time):
        call it in a worker thread."""
        address = entry.physical_address
        if reads_pinned(self._adapter, namespace, address):
            version = SourceVersion(
                int(entry.size), entry.etag, _recorded_mtime(entry), entry.metadata.get(SOURCE_VERSION_KEY, "")
            )
            return self._edge_url(request, full_address(namespace, address), "GET", filename, version)
        return self._sign(request, namespace, address, "GET", filename)

    def sign_key_read(self, request: Request, namespace: str, key: str, filename: str) -> PresignedURL:
        """A GET URL for a file Silt wrote in a namespace (a GC run's file, a range): no entry,
        so no source version to pin (blocking, as sign_read)."""
        return self._sign(request, namespace, key, "GET", filename)

    def sign_upload(self, request: Request, namespace: str, address: str) -> PresignedURL:
        """A PUT URL for an address of the namespace (blocking, as sign_read)."""
        return self._sign(request, namespace, address, "PUT", "")

    def sign_part(
        self, request: Request, namespace: str, address: str, upload_id: str, part_number: int
    ) -> PresignedURL:
        """A PUT URL for one part of the block adapter's multipart upload `upload_id` of an address
        of the namespace (blocking, as sign_read)."""
        store_namespace, key = split_address(namespace, address)
        expires_in = self.settings.pre_signed_expiry_seconds
        url = self._adapter.presign_part(store_namespace, key, upload_id, part_number, expires_in)
        if url is not None:
            return url
        part = UploadPartGrant(upload_id, part_number)
        origin = self._origin(request)
        return self.edge.sign(origin, full_address(namespace, address), "PUT", expires_in, part=part)

    def _sign(
        self, request: Request, namespace: str, address: str, method: PresignMethod, filename: str
    ) -> PresignedURL:
        store_namespace, key = split_address(namespace, address)
        expires_in = self.settings.pre_signed_expiry_seconds
        url = self._adapter.presign(store_namespace, key, method, expires_in, filename or None)
        if url is not None:
            return url
        return self._edge_url(request, full_address(namespace, address), method, filename, None)

    def _edge_url(
        self, request: Request, address: str, method: PresignMethod, filename: str, version: SourceVersion | None
    ) -> PresignedURL:
        expires_in = self.settings.pre_signed_expiry_seconds
        return self.edge.sign(self._origin(request), address, method, expires_in, filename, version)

    def _origin(self, request: Request) -> str:
        """Where the client reaches this server: the configured endpoint, else the request's own
        scheme and Host (the URL goes back to the very client that sent them)."""
        if self.settings.pre_signed_endpoint:
            return self.settings.pre_signed_endpoint
        host = request.headers.get("host", "")
        if not _HOST.fullmatch(host):
            raise bad_request(
                "the request's Host header cannot name this server in a presigned URL; "
                f"set {self._section}.pre_signed_endpoint"
            )
        return f"{request.url.scheme}://{host}"


def presigner(request: Request) -> Presigner:
    """The app's Presigner, made on first use (the backend's adapter exists once the app started)."""
    state = request.app.state
    found: Presigner | None = getattr(state, "presigner", None)
    if found is None:
        found = state.presigner = Presigner(state.config, backend_of(request).adapter)
    return found


def download_name(path: str) -> str:
    """The name a presigned download is saved as: the path's last part."""
    return path.rstrip("/").rsplit("/", 1)[-1]


def _recorded_mtime(entry: pb.Entry) -> int:
    """The source's modification time an import recorded (ns; 0 when it recorded none)."""
    recorded = entry.metadata.get(SOURCE_MTIME_KEY, "")
    return int(recorded) if recorded.isascii() and recorded.isdigit() else 0
