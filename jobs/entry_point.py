"""What the jobs' spark-submit entry points share: the session, the client options and the
exit codes (``python -m jobs.gc.job``, ``python -m jobs.retention.last_access``)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from silt.client import Client
    from silt.config import Config


def job_session(master: str | None, app_name: str) -> Any:
    """spark-submit's session when spark-submit started the job (it chose the master), else a
    local one on `master` (default local[*])."""
    from silt.spark import WORKER_SETTINGS, local_session

    if master is None and os.environ.get("PYSPARK_GATEWAY_PORT"):
        from pyspark import SparkConf, SparkContext
        from pyspark.sql import SparkSession

        # spark-submit's settings, which win over ours: a SparkConf reads them from the JVM only
        # once this process is attached to it (pyspark's SparkContext does this same call first).
        SparkContext._ensure_initialized()
        submitted = SparkConf()
        builder = SparkSession.builder.appName(app_name)
        for key, value in WORKER_SETTINGS.items():
            if not submitted.contains(key):
                builder = builder.config(key, value)
        return builder.getOrCreate()
    return local_session(None, master=master or "local[*]", app_name=app_name)


def add_job_options(parser: argparse.ArgumentParser) -> None:
    """The options every job takes: where Spark runs, and how to reach Silt (as the CLI does)."""
    parser.add_argument("--master", help="Spark master (default: spark-submit's, else local[*])")
    parser.add_argument("--config", help="Silt YAML configuration (default: $SILT_CONFIG)")
    parser.add_argument("--graveler", metavar="HOST:PORT", help="graveler endpoint (default: as the silt CLI)")


def job_config(path: str | None) -> Config:
    """The whole configuration, every section validated: a job opens the stores (--config, else
    $SILT_CONFIG, else where the CLI looks)."""
    from silt.client_base import find_config_path
    from silt.config import load_config

    return load_config(find_config_path(path))


def job_client(config: Config, graveler: str | None) -> Client:
    """Signed channels to the services, found and authenticated as the CLI's are (its saved
    login, SILT_* variables); --graveler wins over both."""
    from silt.client import Client, resolve_settings

    return Client(resolve_settings(config, graveler))


def start_job(args: argparse.Namespace, config: Config, app_name: str) -> tuple[Any, Any]:
    """The job's Spark session and graveler stub (from add_job_options' --master and --graveler).

    Spark before any gRPC call: PySpark forks its JVM with a preexec_fn, and a fork while gRPC's
    threads run can kill the child before it execs (the gateway then never starts)."""
    spark = job_session(args.master, app_name)
    return spark, job_client(config, args.graveler).graveler


def repository_name(argument: str) -> str:
    """The repository a job's argument names, written with or without ``silt://``."""
    return argument.removeprefix("silt://").strip("/")


def print_progress(message: str) -> None:
    """Progress goes to stderr: stdout carries only the summary, for scripts."""
    print(message, file=sys.stderr, flush=True)


def exit_code_of_main(prog: str, main: Callable[[], int]) -> int:
    """Run a job's main; a Silt error is one line and the CLI's exit codes, for cron jobs and scripts."""
    from silt.client_base import ClientError, exit_code_of
    from silt.errors import SiltError

    try:
        return main()
    except SiltError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return exc.exit_code if isinstance(exc, ClientError) else exit_code_of(exc)
