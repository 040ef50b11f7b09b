"""The hypothesis strategies that draw recipes: S3 operations with tricky keys, queries,
headers and bodies, and raw mutations of the signed bytes."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from hypothesis import strategies as st

from tests.support.fuzz.target import BUCKET

# Text that once broke parsers somewhere: numbers Python's int() and isdigit() disagree on,
# escapes, control characters, huge digit strings.
TRICKY = [
    "",
    " ",
    "0",
    "00",
    "-1",
    "+1",
    "1 ",
    " 1",
    "1e3",
    "0x10",
    "1_0",
    "²",
    "¹²",
    "٣",
    "\u0661\u0660",
    "①",
    "½",
    "9" * 19,
    "9" * 5000,
    "4294967296",
    "18446744073709551616",
    "%",
    "%ff",
    "%00",
    "%2F",
    "%%",
    "%g1",
    "\x00",
    "\x01",
    "\x7f",
    "\t",
    "é",
    "\xff",
    "\xa0",
    "\x85",
    "\u2028",
    "é" * 3000,
    "true",
    "false",
    "null",
    "..",
    "../..",
    "/",
    "main/",
    "*",
    "\\",
    "'",
    '"',
    "<",
    "&",
    ";",
    "bytes=",
    "bytes=-",
    "bytes=0-",
    "bytes=1-0",
    "bytes=0-0,1-1",
    "bytes=²-³",
    "bytes=٣-",
]
tricky = st.sampled_from(TRICKY)
latin1 = st.text(st.characters(max_codepoint=255), max_size=30)
printable = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=30)
text = st.one_of(tricky, latin1, printable, st.text(max_size=10))
header_text = st.one_of(tricky, latin1, printable).map(lambda s: s.encode("latin-1", "replace").decode("latin-1"))
digits = st.one_of(st.integers(-3, 10_005).map(str), tricky)

KEYS = [
    "main/obj",
    "main/dir/a",
    "main/new",
    "main/",
    "main",
    "nobranch/k",
    "main/é",
    "main/a b",
    "main/%ff",
    "main/%00",
    "main/..%2F..",
    "main/" + "k" * 1100,
    "main/\x01",
    "main/%C3%28",
    "main/dir/",
    "main//x",
]
keys = st.one_of(st.sampled_from(KEYS), text.map(lambda t: "main/" + t), text)
buckets = st.one_of(st.just(BUCKET), st.sampled_from(["nosuch", "FUZZ", "a", "fuzz-", "xn--fuzz", "f" * 64, "fuzz%2e"]))

HEADER_NAMES = [
    "Content-Length",
    "Transfer-Encoding",
    "Host",
    "Authorization",
    "X-Amz-Date",
    "X-Amz-Content-SHA256",
    "Content-MD5",
    "Content-Type",
    "Range",
    "x-amz-copy-source",
    "x-amz-copy-source-range",
    "x-amz-decoded-content-length",
    "Content-Encoding",
    "Expect",
    "Connection",
    "If-Match",
    "If-None-Match",
    "If-Modified-Since",
    "If-Unmodified-Since",
    "x-amz-meta-m",
    "x-amz-checksum-crc32",
    "x-amz-checksum-sha256",
    "x-amz-checksum-crc64nvme",
    "x-amz-sdk-checksum-algorithm",
    "x-amz-checksum-algorithm",
    "x-amz-trailer",
    "x-amz-metadata-directive",
    "Date",
    "Upgrade",
    "x-amz-copy-source-if-match",
    "x-amz-copy-source-if-modified-since",
    "x-amz-copy-source-if-none-match",
    "Cache-Control",
    "Expires",
]
header_names = st.one_of(st.sampled_from(HEADER_NAMES), latin1.filter(bool), st.just("x-amz-meta-é"))
HEADER_VALUES = {
    "Range": ["bytes=0-9", "bytes=5-", "bytes=-3", "bytes=0-" + "9" * 30, "bytes=99999-", "bytes=2-1"],
    "x-amz-copy-source": [
        f"/{BUCKET}/main/obj",
        f"{BUCKET}/main/obj",
        f"/{BUCKET}/main/%ff",
        "/nosuch/main/obj",
        f"/{BUCKET}/main/obj?versionId=1",
        f"/{BUCKET}/nobranch/obj",
        f"/{BUCKET}/main/",
    ],
    "x-amz-copy-source-range": ["bytes=0-9", "bytes=0-" + "9" * 5000, "bytes=5-1", "bytes=٣-٤", "bytes=²-³"],
    "x-amz-decoded-content-length": ["3", "²", "-1", "9" * 5000, "٣"],
    "Content-MD5": ["1B2M2Y8AsgTpgAmY7PhCfg==", "not base64", "AAAA", ""],
    "x-amz-checksum-crc32": ["AAAAAA==", "!!", ""],
    "x-amz-sdk-checksum-algorithm": ["CRC32", "SHA256", "CRC64NVME", "MD5", "crc32c", ""],
    "x-amz-checksum-algorithm": ["CRC32", "SHA1", "bogus"],
    "x-amz-metadata-directive": ["COPY", "REPLACE", "replace", "MOVE"],
    "Expect": ["100-continue", "100-Continue", "200-ok"],
    "Transfer-Encoding": ["chunked", "gzip, chunked", "identity", "chunked, chunked"],
    "If-Modified-Since": ["Sun, 22 Nov 2026 10:00:00 GMT", "Sun, 4294967296 Nov 2026 1:00:00 GMT", "yesterday"],
    "x-amz-copy-source-if-modified-since": ["Sun, 22 Nov 2026 10:00:00 GMT", "Sun, 99 Nov 99999999999 0:0:0 GMT"],
}


@st.composite
def semantic_headers(draw: st.DrawFn) -> list[list[str]]:
    out = []
    for _ in range(draw(st.integers(0, 3))):
        name = draw(st.one_of(st.sampled_from(sorted(HEADER_VALUES)), st.sampled_from(HEADER_NAMES)))
        known = HEADER_VALUES.get(name, [])
        value = draw(st.one_of(st.sampled_from(known), header_text) if known else header_text)
        out.append([name, value])
    return out


LIST_PARAMS = [
    "prefix",
    "delimiter",
    "max-keys",
    "continuation-token",
    "start-after",
    "encoding-type",
    "fetch-owner",
    "marker",
    "list-type",
    "uploads",
    "key-marker",
    "max-uploads",
    "versions",
    "acl",
]
query_pairs = st.lists(
    st.tuples(st.one_of(st.sampled_from(LIST_PARAMS), text), st.one_of(text, digits)).map(list), max_size=4
)

delete_specs = st.fixed_dictionaries(
    {
        "keys": st.lists(keys, max_size=4),
        "extra": st.one_of(st.just(0), st.integers(0, 1005)),
        "ns": st.booleans(),
        "quiet": st.booleans(),
    }
)
complete_specs = st.fixed_dictionaries(
    {
        "parts": st.lists(
            st.tuples(
                st.one_of(st.just("1"), digits),
                st.one_of(st.just("$ETAG"), st.just('"$ETAG"'), text),
                st.sampled_from(
                    [
                        "",
                        "<ChecksumCRC32>AAAAAA==</ChecksumCRC32>",
                        "<ChecksumType>X</ChecksumType>",
                        "<Checksum>1</Checksum>",
                        "<PartNumber>2</PartNumber>",
                    ]
                ),
            ).map(list),
            min_size=0,
            max_size=4,
        ),
        "extra": st.one_of(st.just(0), st.integers(0, 10_001)),
        "ns": st.booleans(),
    }
)
xml_mutations = st.one_of(
    st.just({"k": "none"}),
    st.fixed_dictionaries({"k": st.just("truncate"), "at": st.integers(0, 10_000)}),
    st.fixed_dictionaries({"k": st.just("insert"), "at": st.integers(0, 10_000), "v": text}),
    st.fixed_dictionaries({"k": st.just("deep"), "depth": st.sampled_from([100, 5_000, 200_000])}),
    st.fixed_dictionaries(
        {"k": st.just("rename"), "v": st.sampled_from(["x", "Delete", "Part", "a:b", "Object"]), "n": st.integers(1, 3)}
    ),
    st.just({"k": "billion_laughs"}),
    st.fixed_dictionaries(
        {
            "k": st.just("external_entity"),
            "v": st.sampled_from(["file:///etc/passwd", "http://127.0.0.1:1/x", "/dev/zero"]),
        }
    ),
    st.fixed_dictionaries(
        {"k": st.just("external_dtd"), "v": st.sampled_from(["file:///dev/zero", "http://127.0.0.1:1/d"])}
    ),
    st.just({"k": "utf16"}),
    st.just({"k": "declared_utf16"}),
    st.fixed_dictionaries({"k": st.just("huge_text"), "size": st.sampled_from([2_000, 1_100_000, 4_300_000])}),
)

OPS = {
    "put": "PUT",
    "put_chunked": "PUT",
    "get": "GET",
    "head": "HEAD",
    "list": "GET",
    "delete_objects": "POST",
    "create": "POST",
    "upload_part": "PUT",
    "complete": "POST",
    "copy": "PUT",
    "upload_part_copy": "PUT",
    "list_parts": "GET",
    "abort": "DELETE",
    "delete": "DELETE",
    "put_trailer": "PUT",
    "bucket_get": "GET",
    "head_bucket": "HEAD",
    "create_bucket": "PUT",
    "delete_bucket": "DELETE",
    "service": "GET",
}


@st.composite
def operations(draw: st.DrawFn) -> dict[str, Any]:
    """A valid request of one operation with drawn semantic parts, signed after drawing."""
    op = draw(st.sampled_from(sorted(OPS)))
    recipe: dict[str, Any] = {
        "op": op,
        "method": OPS[op],
        "bucket": draw(st.one_of(st.just(BUCKET), st.just(BUCKET), buckets)),
        "key": draw(st.one_of(st.just("main/obj"), keys)),
        "query": [],
        "headers": draw(semantic_headers()),
        "style": draw(st.sampled_from(["path", "path", "path", "virtual"])),
        "sign": "v4"
        if op in ("put_chunked", "put_trailer")
        else draw(st.sampled_from(["v4", "v4", "v4-unsigned", "v4-presigned", "v2", "v2-presigned"])),
        "user": draw(st.sampled_from(["admin", "admin", "admin", "reader"])),
    }
    if op in ("put", "upload_part"):
        recipe["body"] = draw(st.one_of(st.binary(max_size=300), st.sampled_from([b"", b"x" * 70_000]))).decode(
            "latin-1"
        )
    if op == "put_trailer":
        recipe["trailer"] = [
            draw(st.sampled_from(["x-amz-checksum-crc32", "x-amz-checksum-sha256", "x-amz-checksum-crc64nvme", "x"])),
            draw(st.one_of(st.just("$CORRECT"), st.just("$CORRECT"), header_text)),
        ]
    if op in ("put_chunked", "put_trailer"):
        recipe["chunks"] = [
            c.decode("latin-1") for c in draw(st.lists(st.binary(min_size=1, max_size=200), max_size=3))
        ]
        recipe["decoded_length"] = draw(st.one_of(st.just(""), digits))
    if op in ("upload_part", "complete", "upload_part_copy", "list_parts", "abort"):
        recipe["upload"] = draw(st.one_of(st.just("$FRESH"), st.just("$FRESH"), text, st.just("0" * 32)))
        recipe["part"] = draw(st.one_of(st.just("1"), digits))
    if op == "get":
        recipe["part"] = draw(st.one_of(st.just(""), st.just(""), digits))
        recipe["query"] = draw(
            st.lists(
                st.tuples(
                    st.sampled_from(["response-content-type", "response-expires", "response-cache-control"]), text
                ).map(list),
                max_size=2,
            )
        )
        if draw(st.booleans()):
            recipe["headers"].append(
                [
                    "Range",
                    draw(st.one_of(st.sampled_from(HEADER_VALUES["Range"]), text.map(lambda t: "bytes=" + t), text)),
                ]
            )
    if op == "list":
        recipe["query"] = [["list-type", "2"], *draw(query_pairs)]
    if op in ("copy", "upload_part_copy"):
        recipe["headers"].append(
            ["x-amz-copy-source", draw(st.one_of(st.sampled_from(HEADER_VALUES["x-amz-copy-source"]), text))]
        )
    if op == "delete_objects":
        recipe["xml"] = draw(delete_specs)
    if op == "complete":
        recipe["xml"] = draw(complete_specs)
    if op in ("delete_objects", "complete"):
        recipe["xml_mutation"] = draw(xml_mutations)
        recipe["md5"] = draw(st.sampled_from(["valid", "valid", "wrong", "none"]))
    if op == "bucket_get":
        recipe["sub"] = draw(st.sampled_from(["", "location", "versioning", "uploads", "acl", "policy", "tagging"]))
        recipe["query"] = draw(query_pairs)
    if op == "create_bucket":
        recipe["bucket"] = draw(st.one_of(buckets, st.from_regex(r"\Az[a-z0-9-]{2,8}\Z")))
        configuration = (
            "<CreateBucketConfiguration><LocationConstraint>x</LocationConstraint></CreateBucketConfiguration>"
        )
        recipe["body"] = draw(st.sampled_from(["", configuration, "<x", "a" * 5_000_000]))
    if op == "delete_bucket":
        recipe["bucket"] = draw(st.sampled_from(["nosuch", "zfuzz", "fuzz-", "a"]))
    if op == "service":
        recipe["key"] = draw(
            st.one_of(st.sampled_from(["/", "/_silt/health/live", "/_silt/health/ready", "/_silt/health", "//"]), text)
        )
        recipe["key"] = recipe["key"] if recipe["key"].startswith("/") else "/" + quote(recipe["key"], safe="/%")
    if op == "create":
        recipe["headers"].append(
            ["x-amz-checksum-algorithm", draw(st.sampled_from(["CRC32", "CRC32C", "SHA256", "X"]))]
        )
    return recipe


raw_mutation = st.one_of(
    st.fixed_dictionaries(
        {
            "k": st.just("method"),
            "v": st.sampled_from(
                ["GET", "PUT", "POST", "DELETE", "HEAD", "OPTIONS", "PATCH", "CONNECT", "get", "G\x00T", "", "PROPFIND"]
            ),
        }
    ),
    st.fixed_dictionaries(
        {
            "k": st.just("version"),
            "v": st.sampled_from(
                ["HTTP/1.0", "HTTP/2.0", "HTTP/9.9", "HTTP/1.1x", "", "HTTP/1.1 extra", "http/1.1", "HTTP/1"]
            ),
        }
    ),
    st.fixed_dictionaries(
        {
            "k": st.just("target"),
            "op": st.sampled_from(["insert", "replace", "truncate", "append"]),
            "at": st.integers(0, 300),
            "v": st.one_of(
                text,
                st.sampled_from(
                    [
                        "%ff",
                        "%",
                        "%00",
                        "?",
                        "#",
                        "//",
                        "/../",
                        " ",
                        "?uploads",
                        "?delete",
                        "&x-id=PutObject",
                        "?acl",
                        "x" * 9000,
                    ]
                ),
            ),
        }
    ),
    st.fixed_dictionaries({"k": st.just("set_header"), "name": header_names, "v": header_text}),
    st.fixed_dictionaries(
        {"k": st.just("add_header"), "name": header_names, "v": header_text, "at": st.integers(0, 20)}
    ),
    st.fixed_dictionaries(
        {
            "k": st.just("drop_header"),
            "name": st.sampled_from(
                [
                    "Host",
                    "Authorization",
                    "X-Amz-Date",
                    "X-Amz-Content-SHA256",
                    "Content-Length",
                    "Date",
                    "Connection",
                    "Content-MD5",
                    "x-amz-decoded-content-length",
                    "content-encoding",
                ]
            ),
        }
    ),
    st.fixed_dictionaries(
        {"k": st.just("huge_header"), "name": header_names, "size": st.sampled_from([8_000, 8_200, 70_000, 1_100_000])}
    ),
    st.fixed_dictionaries({"k": st.just("many_headers"), "n": st.integers(1, 300), "size": st.sampled_from([1, 250])}),
    st.fixed_dictionaries(
        {
            "k": st.just("auth_field"),
            "field": st.sampled_from(["Credential", "SignedHeaders", "Signature", "Algorithm", "Date", "Expires"]),
            "v": st.one_of(
                text,
                st.sampled_from(
                    [
                        "AKIA/20261122/us-east-1/s3/aws4_request",
                        "/",
                        "////",
                        "host;x-amz-date;range",
                        "host;;",
                        "",
                        "0" * 64,
                        "é" * 64,
                        "\xff" * 64,
                        "99999999999999999999",
                        "-1",
                        "604801",
                    ]
                ),
            ),
        }
    ),
    st.fixed_dictionaries(
        {
            "k": st.just("body"),
            "op": st.sampled_from(["truncate", "insert", "append", "replace"]),
            "at": st.integers(0, 100_000),
            "v": text,
        }
    ),
    st.fixed_dictionaries(
        {
            "k": st.just("chunk"),
            "op": st.sampled_from(["size", "signature", "extension", "drop_last", "trailer", "no_crlf"]),
            "at": st.integers(0, 5),
            "v": st.one_of(
                text,
                st.sampled_from(
                    [
                        "+3",
                        "0x3",
                        "ffffffffffffffff",
                        "fffffffffffffffff",
                        "-1",
                        "0",
                        "x-amz-checksum-crc32:AAAAAA==",
                        "x-amz-trailer-signature:" + "0" * 64,
                        "a" * 2000,
                        "\r\n",
                    ]
                ),
            ),
        }
    ),
    st.fixed_dictionaries({"k": st.just("bare_lf"), "at": st.integers(0, 1), "v": printable}),
    st.fixed_dictionaries(
        {"k": st.just("byte"), "at": st.integers(0, 2000), "byte": st.sampled_from([0, 10, 13, 32, 37, 58, 127, 255])}
    ),
    st.fixed_dictionaries({"k": st.just("http_chunked"), "at": st.sampled_from([1, 7, 100, 65536])}),
)


@st.composite
def recipes(draw: st.DrawFn, intact: int = 1) -> dict[str, Any]:
    """intact: weight of requests without raw mutations against 1 for mutated ones (1: about a
    third stay intact, so that the semantic parts alone reach the operations)."""
    recipe = draw(operations())
    mutated = st.lists(raw_mutation, min_size=1, max_size=3)
    recipe["mutations"] = draw(st.one_of(*[st.just([])] * intact, mutated))
    recipe["split_at"] = draw(st.one_of(st.none(), st.integers(1, 400)))
    return recipe
