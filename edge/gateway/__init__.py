"""The S3 gateway: the S3 HTTP API over Silt."""
