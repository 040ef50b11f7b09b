"""Bucket operations: a bucket is a repository."""

from __future__ import annotations

from edge.gateway.errors import S3Error
from edge.gateway.operations.common import Context, Response, iso_time, x, xml_response
from edge.gateway.operations.listing import branches, decode_token, encode_token
from silt.graveler.v1 import graveler_pb2 as api
from silt.iam_actions import CREATE_REPO, DELETE_REPO, READ_OBJECT, READ_REFS, READ_REPO, WRITE_OBJECT

_XMLNS = 'xmlns="http://s3.amazonaws.com/doc/2006-03-01/"'


# S3's page size when ListBuckets is asked for a page (max-buckets, prefix or a token).
MAX_BUCKETS = 10_000


def _max_buckets(ctx: Context) -> int:
    raw = ctx.request.arg("max-buckets")
    if raw is None:
        return MAX_BUCKETS
    if not raw.isdigit() or len(raw) > 5 or not 1 <= int(raw) <= MAX_BUCKETS:
        raise S3Error("InvalidArgument", "max-buckets must be between 1 and 10000", ArgumentName="max-buckets")
    return int(raw)


async def list_buckets(ctx: Context) -> Response:
    """ListBuckets, in pages when asked: max-buckets, continuation-token and prefix."""
    request = ctx.request
    limit = _max_buckets(ctx)
    prefix = request.arg("prefix") or ""
    token = request.arg("continuation-token")
    paged = any(request.has(name) for name in ("max-buckets", "prefix", "continuation-token"))
    after = decode_token(token) if token else ""
    if token and encode_token(after) != token:
        raise S3Error("InvalidArgument", "The continuation token provided is incorrect")
    backend = ctx.backend
    listed: list[api.RepositoryInfo] = []
    has_more = True
    # Repository pages are filtered by the caller's permissions, so a page may take several.
    while has_more and len(listed) <= limit:
        page = await backend.call(
            backend.graveler.ListRepositories, api.ListRepositoriesRequest(after=after, amount=1000), "NoSuchBucket"
        )
        has_more = page.has_more and bool(page.repositories)
        if page.repositories:
            after = page.repositories[-1].name
        candidates = [r for r in page.repositories if r.name.startswith(prefix)]
        if prefix and after > prefix and not after.startswith(prefix):
            has_more = False  # names are listed in order: none further has the prefix
        # ReadRefs: held through ReadRepo too, and by readers of some keys who may open it.
        names = [r.name for r in candidates]
        allowed = await backend.allowed_many(ctx.user_id, READ_REFS, names, ctx.request.source_ip)
        listed += [r for r, ok in zip(candidates, allowed, strict=True) if ok]
    more = len(listed) > limit
    listed = listed[:limit]
    buckets = "".join(
        f"<Bucket><Name>{x(r.name)}</Name><CreationDate>{iso_time(r.creation_date.ToDatetime())}</CreationDate></Bucket>"
        for r in listed
    )
    owner = f"<Owner><ID>{x(ctx.user_id)}</ID><DisplayName>{x(ctx.user_id)}</DisplayName></Owner>"
    extra = ""
    if paged and more and listed:
        extra += f"<ContinuationToken>{encode_token(listed[-1].name)}</ContinuationToken>"
    if request.has("prefix"):
        extra += f"<Prefix>{x(prefix)}</Prefix>"
    return xml_response(
        f"<ListAllMyBucketsResult {_XMLNS}>{owner}<Buckets>{buckets}</Buckets>{extra}</ListAllMyBucketsResult>"
    )


async def head_bucket(ctx: Context) -> Response:
    # Anyone who may read or write some key of the repository may know it exists (S3 clients
    # head a bucket before reading from it or writing to it).
    reading = await ctx.backend.key_scope(ctx.user_id, READ_OBJECT, ctx.request.bucket, source_ip=ctx.request.source_ip)
    if reading.nothing:
        await ctx.key_scope(WRITE_OBJECT, ctx.request.bucket)  # AccessDenied for no key either
    await ctx.backend.namespace(ctx.request.bucket)
    return Response(200, [("x-amz-bucket-region", ctx.config.region)])


async def get_bucket_location(ctx: Context) -> Response:
    await head_bucket(ctx)
    # S3 answers an empty constraint for us-east-1.
    region = "" if ctx.config.region == "us-east-1" else x(ctx.config.region)
    return xml_response(f"<LocationConstraint {_XMLNS}>{region}</LocationConstraint>")


async def get_bucket_versioning(ctx: Context) -> Response:
    await head_bucket(ctx)
    # Versions are commits, not S3 object versions: S3 versioning is never enabled.
    return xml_response(f"<VersioningConfiguration {_XMLNS}/>")


async def create_bucket(ctx: Context) -> Response:
    repository = ctx.request.bucket
    template = ctx.config.storage_namespace_template
    if not template:
        raise S3Error(
            "NotImplemented",
            "creating buckets needs gateways.s3.storage_namespace_template; create repositories with the silt CLI",
        )
    await ctx.authorize(CREATE_REPO, repository)
    await ctx.request.body.read_all()  # a CreateBucketConfiguration, if any: the region is ours
    request = api.CreateRepositoryRequest(name=repository, storage_namespace=template.format(repo=repository))
    try:
        await ctx.backend.call(ctx.backend.graveler.CreateRepository, request, "NoSuchBucket")
    except S3Error as exc:
        if exc.code != "BucketAlreadyOwnedByYou":
            raise
        await _already_exists(ctx, repository)
    return Response(200, [("Location", f"/{repository}")])


async def _already_exists(ctx: Context, repository: str) -> None:
    """S3's answers to creating a bucket that exists: BucketAlreadyExists (409) when it is not
    the caller's (here: one the caller may not read); the caller's own is BucketAlreadyOwnedByYou
    (409) in every region but us-east-1, where S3 keeps its legacy answer, 200 (the repository
    is left as it is). Returns for that 200."""
    if not await ctx.backend.allowed(ctx.user_id, READ_REPO, repository, ctx.request.source_ip):
        raise S3Error("BucketAlreadyExists", BucketName=repository)
    if ctx.config.region != "us-east-1":
        raise S3Error("BucketAlreadyOwnedByYou", BucketName=repository)


async def delete_bucket(ctx: Context) -> Response:
    repository = ctx.request.bucket
    await ctx.authorize(DELETE_REPO, repository)
    backend = ctx.backend
    await backend.namespace(repository)
    for branch in await branches(ctx, repository):
        page = await backend.list_entries(api.ListEntriesRequest(repository=repository, ref=branch, amount=1))
        if page.items:
            raise S3Error("BucketNotEmpty", f"branch {branch} of {repository} has objects")
    await backend.call(backend.graveler.DeleteRepository, api.DeleteRepositoryRequest(name=repository), "NoSuchBucket")
    backend.forget_namespace(repository)
    return Response(204)
