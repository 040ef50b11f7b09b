"""Which objects of a branch its last-access rules expire, as a DataFrame.

Inputs: graveler's export for the run (``_silt/retention/<run>/``): the branch's listing under
the rules' prefixes and its read and write history events.

An object's last access is its latest read or write event on the branch, and never earlier
than its modification time: history events may be dropped under overload or trimmed by the
history's retention, the modification time cannot be. An entry without one (-1 in the
export) has an unknown age and is never expired. A rule expires an object under one of its
prefixes whose last access is older than the run's start minus the rule's days; an object
that several rules expire is reported under the first of them, in the order the rules are
stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from silt.graveler.v1 import model_pb2 as pb

_MICROS_PER_DAY = 86_400 * 1_000_000


def last_access(listing: DataFrame, events: DataFrame) -> DataFrame:
    """The listing with ``last_access_us``: latest event, else (and at least) the modification time."""
    latest = events.groupBy("key").agg(F.max("timestamp_us").alias("last_event_us"))
    joined = listing.join(latest, "key", "left")
    return joined.withColumn(
        "last_access_us", F.greatest(F.col("last_modified_us"), F.coalesce(F.col("last_event_us"), F.lit(-1)))
    ).drop("last_event_us")


def _under(prefixes: Sequence[str]) -> Column:
    condition: Column = F.lit(False)
    for prefix in prefixes:
        condition = condition | F.col("key").startswith(prefix)
    return condition


def expired(accessed: DataFrame, rules: Sequence[pb.LastAccessRule], started_us: int) -> DataFrame:
    """Rows of ``accessed`` some rule expires, with ``rule``: the 1-based place of the first
    one in ``rules`` (the branch's rules, as graveler exported them)."""
    known = accessed.where(F.col("last_modified_us") >= 0)
    rule_of: Any = F.lit(None).cast("int")
    for number in range(len(rules), 0, -1):  # built from the last, so the first rule wins
        rule = rules[number - 1]
        cutoff = started_us - rule.days * _MICROS_PER_DAY
        too_old = F.col("last_access_us") < F.lit(cutoff)
        rule_of = F.when(_under(rule.prefixes) & too_old, F.lit(number)).otherwise(rule_of)
    return known.withColumn("rule", rule_of).where(F.col("rule").isNotNull())
