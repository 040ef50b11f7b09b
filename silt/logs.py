"""Logging set up from the `logging` section of the configuration, the same in every process."""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

from silt.config import LoggingConfig
from silt.telemetry.requestid import RequestIdFilter

_LEVELS = {"DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING, "ERROR": logging.ERROR}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = getattr(record, "request_id", None)
        if request_id:
            entry["request_id"] = request_id
        # Structured lines (the access log) pass their fields as extra={"fields": {...}}.
        entry.update(getattr(record, "fields", None) or {})
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


class TextFormatter(logging.Formatter):
    """The plain format, with the request id appended to lines logged while serving one."""

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        request_id = getattr(record, "request_id", None)
        return f"{line} request_id={request_id}" if request_id else line


def configure_logging(config: LoggingConfig, service: str) -> None:
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    if config.level == "NONE":
        root.addHandler(logging.NullHandler())
        return
    handler: logging.Handler = (
        logging.StreamHandler(sys.stdout) if config.output == "-" else logging.FileHandler(config.output)
    )
    if config.format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter(f"%(asctime)s {service} %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RequestIdFilter())
    root.addHandler(handler)
    root.setLevel(_LEVELS[config.level])
    # The Azure SDK logs every HTTP request and response at INFO (8 lines each): its warnings
    # and errors are what an operator needs, the rest drowns the services' own lines.
    logging.getLogger("azure").setLevel(max(logging.WARNING, _LEVELS[config.level]))
