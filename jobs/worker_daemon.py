"""The daemon Spark forks the jobs' Python workers from (``spark.python.daemon.module``):
pyspark's own, run once the archives Spark puts first on its path, and the workers need not
import from, are off ``sys.path``.

Spark's workers start with ``$SPARK_HOME/python/lib/pyspark.zip``, py4j's zip and the
spark-core jar on their path (PythonUtils.sparkPythonPath), and pip's pyspark sets SPARK_HOME
to the installed package, which holds the same modules. Every task calls
``importlib.invalidate_caches()`` (``pyspark.worker_util.setup_spark_files``), and Python
3.11's zipimporter then reads each archive's directory again, in Python: 5,400 entries for the
jar, which holds no Python at all, and 1,300 for pyspark's zip, from which every daemon also
compiles pyspark from source (zipimport keeps no bytecode). Without them, the same modules load
from site-packages' cached bytecode and a cache invalidation costs nothing: the workers' CPU in
the GC job's tests fell from 36 s to 7 s. An archive that is the only place a package is
found (a Spark distribution without pip's pyspark) stays.
"""

from __future__ import annotations

import importlib.machinery
import os
import re
import runpy
import sys
import zipfile

# The zips Spark adds: pyspark.zip and py4j-<version>-src.zip.
_SPARK_ZIP = re.compile(r"(pyspark|py4j-[0-9.]+-src)\.zip")
_PYTHON_SUFFIXES = (".py", ".pyc", ".so")


def _package(archive: str) -> str:
    """The package a Spark zip holds (pyspark, py4j)."""
    return os.path.basename(archive).split("-", 1)[0].removesuffix(".zip")


def _holds_python(archive: str) -> bool:
    try:
        with zipfile.ZipFile(archive) as opened:
            return any(name.endswith(_PYTHON_SUFFIXES) for name in opened.namelist())
    except (OSError, zipfile.BadZipFile):
        return True  # not readable as a zip here: left to the import system, as it was


def without_spark_archives(path: list[str]) -> list[str]:
    """path without jars that hold no Python, and without Spark's pyspark and py4j zips whose
    package the rest of path has."""
    jars = {entry for entry in path if entry.endswith(".jar") and not _holds_python(entry)}
    zips = {entry for entry in path if _SPARK_ZIP.fullmatch(os.path.basename(entry))}
    rest = [entry for entry in path if entry not in jars and entry not in zips]
    dropped = jars | {entry for entry in zips if importlib.machinery.PathFinder.find_spec(_package(entry), rest)}
    return [entry for entry in path if entry not in dropped]


def main() -> None:
    kept = without_spark_archives(sys.path)
    for entry in set(sys.path) - set(kept):
        sys.path_importer_cache.pop(entry, None)
    sys.path[:] = kept
    # As `python -m pyspark.daemon <worker module>` would: the worker module stays in sys.argv.
    runpy.run_module("pyspark.daemon", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
