"""Logging set up from the `logging` section of the configuration, the same in every process."""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

from silt.config import LoggingConfig

_LEVELS = {"DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING, "ERROR": logging.ERROR}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def configure_logging(config: LoggingConfig, service: str) -> None:
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    if config.level == "NONE":
        root.addHandler(logging.NullHandler())
        return
    handler: logging.Handler = (
        logging.StreamHandler(sys.stdout) if config.output == "-" else logging.FileHandler(config.output)
    )
    if config.format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter(f"%(asctime)s {service} %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(_LEVELS[config.level])
