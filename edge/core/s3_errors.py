"""AWS's error model as S3 answers it: a code, its HTTP status and a message. The S3 gateway
renders these as S3's XML (edge/gateway/errors.py); the SigV4 checks both the gateway and the
Iceberg catalog use (edge/core/sigv4.py) raise them, and the catalog maps them to its own model."""

from __future__ import annotations

# code -> (HTTP status, default message), as S3 documents them.
CODES: dict[str, tuple[int, str]] = {
    "AccessDenied": (403, "Access Denied"),
    "AuthorizationHeaderMalformed": (400, "The authorization header is malformed."),
    "AuthorizationQueryParametersError": (400, "Error parsing the X-Amz-Credential parameter."),
    "BadDigest": (400, "The Content-MD5 you specified did not match what we received."),
    "BucketAlreadyExists": (409, "The requested bucket name is not available."),
    "BucketAlreadyOwnedByYou": (409, "Your previous request to create the named bucket succeeded and you own it."),
    "BucketNotEmpty": (409, "The bucket you tried to delete is not empty."),
    "ConditionalRequestConflict": (
        409,
        "A conflicting operation occurred. If using PutObject you can retry the request. "
        "If using multipart upload you should initiate another CreateMultipartUpload request and re-upload each part.",
    ),
    "EntityTooSmall": (400, "Your proposed upload is smaller than the minimum allowed object size."),
    "IncompleteBody": (400, "You did not provide the number of bytes specified by the Content-Length HTTP header."),
    "InternalError": (500, "We encountered an internal error. Please try again."),
    "InvalidAccessKeyId": (403, "The AWS Access Key Id you provided does not exist in our records."),
    "InvalidArgument": (400, "Invalid Argument"),
    "InvalidBucketName": (400, "The specified bucket is not valid."),
    "InvalidDigest": (400, "The Content-MD5 you specified is not valid."),
    "InvalidPart": (400, "One or more of the specified parts could not be found."),
    "InvalidPartNumber": (416, "The requested partnumber is not satisfiable"),
    "InvalidPartOrder": (400, "The list of parts was not in ascending order."),
    "InvalidRange": (416, "The requested range is not satisfiable"),
    "InvalidURI": (400, "Couldn't parse the specified URI."),
    "InvalidRequest": (400, "Invalid Request"),
    "MetadataTooLarge": (400, "Your metadata headers exceed the maximum allowed metadata size."),
    "MalformedXML": (400, "The XML you provided was not well-formed or did not validate against our published schema."),
    "MethodNotAllowed": (405, "The specified method is not allowed against this resource."),
    "MissingContentLength": (411, "You must provide the Content-Length HTTP header."),
    "NoSuchBucket": (404, "The specified bucket does not exist."),
    "NoSuchKey": (404, "The specified key does not exist."),
    "NoSuchUpload": (404, "The specified multipart upload does not exist."),
    "NotImplemented": (501, "A header or operation you provided implies functionality that is not implemented."),
    "NotModified": (304, "Not Modified"),
    "PreconditionFailed": (412, "At least one of the preconditions you specified did not hold."),
    "RequestTimeTooSkewed": (403, "The difference between the request time and the server's time is too large."),
    "ServiceUnavailable": (503, "Please reduce your request rate."),
    "SignatureDoesNotMatch": (
        403,
        "The request signature we calculated does not match the signature you provided. "
        "Check your key and signing method.",
    ),
    "SlowDown": (503, "Please reduce your request rate."),
    "RequestHeaderSectionTooLarge": (400, "Your request header section exceeds the maximum allowed size."),
    "RequestTimeout": (
        400,
        "Your socket connection to the server was not read from or written to within the timeout period.",
    ),
    "XAmzContentSHA256Mismatch": (400, "The provided 'x-amz-content-sha256' header does not match what was computed."),
}


class S3Error(Exception):
    """An error answered to the client as S3 would answer it."""

    # For a graveler NotFound, what it said is missing ("repository", "branch", ...): the S3
    # code alone does not tell (a missing branch is NoSuchBucket too where no code is asked).
    what: str | None = None

    def __init__(self, code: str, message: str | None = None, **extra: str) -> None:
        status, default = CODES[code]
        super().__init__(message or default)
        self.code = code
        self.status = status
        self.message = message or default
        self.extra = extra
