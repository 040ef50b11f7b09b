"""`silt usage summary` (lakectl's): the installation's usage report, from the REST API."""

from __future__ import annotations

import click

from cli.common import json_option, output, rest, table


@click.group("usage")
def usage() -> None:
    """The installation's usage report (lakectl's usage)."""


@usage.command("summary")
@json_option
def summary() -> None:
    """Requests per month, as the server reports them."""
    report = rest().get("/usage-report/summary", what="GET /usage-report/summary")
    reports = report.get("reports") or []
    output(
        report,
        lambda: table(
            ["year", "month", "requests"], [(r.get("year"), r.get("month"), r.get("count")) for r in reports]
        ),
    )
