"""A class-data-sharing archive of the Spark JVM's classes, so that the tests' Spark JVMs start
from mapped, already parsed and verified classes instead of loading thousands from jars.

On this project's 2-core machines a local SparkSession took 8.6-9.1 s to start and its first job
3.8-4.8 s; with the archive 4.5-4.9 s and 1.7-2.1 s; a spark-submit of a small job 12.2 s and
13.8 s of CPU, with it 7.5 s and 9.4 s. Making the archive takes about 40 s and 42 s of CPU,
repaid by about ten JVM starts: `make test` has that many (each leg's session, `silt gc run` and
`gc expire` through the CLI, spark-submit); the Iceberg leg's Spark 3.5 has too few to repay one.

`make test-deps` builds the archive (`python -m tests.support.spark_cds`): one small Spark job
run with -XX:ArchiveClassesAtExit, which the JVM writes as it exits. The archive is valid only
for the JDK and the jar files it was made from, so it lives in the venv whose jars it holds
(<venv>/jvm/, gone with the venv) and its name carries a digest of the JDK's and the jars'
files: a changed venv or JDK looks for another file. A build that fails or runs out of time says
so and leaves none. The tests add the archive to their JVMs' options only when it exists
(`options()`); a JVM whose class path does not match it (spark-submit's launcher, say) runs
without it, silently: the JVM's CDS messages are turned off, because some callers parse what a
JVM prints.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# Beside the jars it is made from; resolved, so that worktrees sharing a venv share its archive.
ARCHIVE_DIR = Path(sys.prefix).resolve() / "jvm"
# The JVM options the tests give their short-lived Spark JVMs (tests/support/spark.py), which
# the archive is made with.
BASE_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
QUIET = "-Xlog:cds*=off"
# A job and the archive its JVM writes as it exits; past this, the dump failed.
BUILD_WAIT_S = 240.0


def _java() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    found = Path(home) / "bin" / "java" if home else None
    if found is None or not found.exists():
        which = shutil.which("java")
        found = Path(which) if which else None
    return found.resolve() if found is not None else None


def _site_packages() -> Path | None:
    """The site-packages whose pyspark (and S3A jars) the tests' Spark JVMs run."""
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))).parent


def archive_path() -> Path | None:
    """Where the archive for this JDK and these jars is (or would be); None without Java or pyspark."""
    java = _java()
    site = _site_packages()
    if java is None or site is None or not (site / "pyspark" / "jars").is_dir():
        return None
    # The JVM refuses an archive made by another build of itself (its base archive included).
    jdk = [java, *(f for f in (java.parents[1] / "lib" / "server").glob("*") if f.suffix in (".so", ".jsa"))]
    digest = hashlib.sha256()
    for file in [*jdk, *sorted(site.resolve().glob("*/jars/*.jar"))]:
        stat = file.stat()
        digest.update(f"{file}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return ARCHIVE_DIR / f"spark-{digest.hexdigest()[:16]}.jsa"


def options() -> str:
    """The JVM options for a short-lived Spark JVM: BASE_OPTIONS, and the archive when it is built."""
    archive = archive_path()
    # The options are split on white space wherever they are passed (JAVA_TOOL_OPTIONS,
    # spark-submit's --driver-java-options): a path with a space would be two options.
    if archive is None or not archive.is_file() or any(c.isspace() for c in str(archive)):
        return BASE_OPTIONS
    return f"{BASE_OPTIONS} -XX:SharedArchiveFile={archive} {QUIET}"


# The job the archive is made from: a session as the tests start one, a DataFrame job, and a
# Parquet write and read (the GC jobs' reports), so that their classes are among the archived.
_JOB = """
import sys
from silt.spark import local_session
spark = local_session(None, app_name="silt-cds", extra={"spark.driver.extraJavaOptions": sys.argv[1]})
out = sys.argv[2]
spark.range(1000).selectExpr("id", "id % 7 AS k").groupBy("k").count().write.parquet(out)
assert spark.read.parquet(out).count() == 7
spark.sql("SELECT 1").collect()
spark.stop()
"""


def _dumping(archive: Path) -> bool:
    """Whether a JVM told to write archive at its exit still runs."""
    needle = str(archive).encode()
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            if needle in cmdline.read_bytes():
                return True
    return False


def build() -> Path | None:
    """Make the archive unless it is there; returns its path (None when it cannot be made)."""
    archive = archive_path()
    if archive is None:
        print("spark_cds: no Java or no pyspark here: no archive", file=sys.stderr)
        return None
    if archive.is_file():
        return archive
    ARCHIVE_DIR.mkdir(parents=True, exist_ok=True)
    for stale in ARCHIVE_DIR.glob("spark-*.jsa"):
        stale.unlink(missing_ok=True)  # another build may have taken it first
    started = time.monotonic()
    with tempfile.TemporaryDirectory(dir=ARCHIVE_DIR) as scratch:
        dumped = Path(scratch) / "dump.jsa"
        log = Path(scratch) / "job.log"
        # The job's output to a file, not a pipe: the JVM inherits it and outlives the job.
        try:
            with log.open("wb") as out:
                code = subprocess.run(
                    [sys.executable, "-c", _JOB, f"{BASE_OPTIONS} -XX:ArchiveClassesAtExit={dumped}", f"{scratch}/t"],
                    cwd=REPO,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    timeout=BUILD_WAIT_S,
                    check=False,
                ).returncode
        except (OSError, subprocess.TimeoutExpired) as exc:
            print(f"spark_cds: the job did not finish ({exc}): no archive", file=sys.stderr)
            return None
        if code != 0:
            tail = log.read_text(errors="replace")[-2000:]
            print(f"spark_cds: the job failed ({code}): no archive\n{tail}", file=sys.stderr)
            return None
        # The JVM writes the archive after the job's process ended: it exits when PySpark's pipe
        # to it closes.
        while _dumping(dumped):
            if time.monotonic() - started > BUILD_WAIT_S:
                print("spark_cds: the JVM did not exit: no archive", file=sys.stderr)
                return None
            time.sleep(0.2)
        if not dumped.is_file():
            print("spark_cds: the JVM wrote no archive", file=sys.stderr)
            return None
        dumped.rename(archive)
    print(f"spark_cds: {archive} ({archive.stat().st_size >> 20} MiB) in {time.monotonic() - started:.0f} s")
    return archive


if __name__ == "__main__":
    # The archive only saves time: whatever goes wrong in making it must not stop the tests.
    try:
        build()
    except Exception as exc:
        print(f"spark_cds: no archive: {exc!r}", file=sys.stderr)
