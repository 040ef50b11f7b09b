"""How an object is compared or queried, from its path's extension and its content type: a
table (CSV, TSV, Parquet), text, an image, or anything else (compared by its metadata only)."""

from __future__ import annotations

TABLE_FORMATS = ("csv", "tsv", "parquet")
TEXT_EXTENSIONS = frozenset(
    [
        "txt",
        "md",
        "markdown",
        "json",
        "jsonl",
        "ndjson",
        "log",
        "yaml",
        "yml",
        "xml",
        "html",
        "htm",
        "py",
        "sql",
        "toml",
        "ini",
        "cfg",
        "sh",
        "js",
        "ts",
        "tsx",
        "css",
        "r",
        "go",
        "rs",
        "java",
        "c",
        "h",
    ]
)
IMAGE_EXTENSIONS = frozenset(["png", "jpg", "jpeg", "gif", "webp", "bmp", "svg"])


def extension(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return name.rsplit(".", 1)[-1].lower() if "." in name else ""


def kind_of(path: str, content_type: str) -> str:
    """One of "csv", "tsv", "parquet", "text", "image", "binary"."""
    ext = extension(path)
    kind = content_type.split(";", 1)[0].strip().lower()
    if ext in TABLE_FORMATS:
        return ext
    if "parquet" in kind:
        return "parquet"
    if kind == "text/csv":
        return "csv"
    if kind == "text/tab-separated-values":
        return "tsv"
    if kind.startswith("image/") or ext in IMAGE_EXTENSIONS:
        return "image"
    if kind.startswith("text/") or kind in ("application/json", "application/xml") or ext in TEXT_EXTENSIONS:
        return "text"
    return "binary"
