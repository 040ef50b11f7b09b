#!/usr/bin/env bash
# A lakectl script as lakeFS's quickstart and lakectl's documentation write them: lakefs:// URIs
# and lakectl's own arguments and flags only. tests/e2e/test_lakectl_script.py runs it with
# `lakectl` being the `silt` CLI, configured by ~/.lakectl.yaml alone.
#
# Usage: REPO=name NAMESPACE=storage-namespace lakectl_quickstart.sh
set -euo pipefail

repo="lakefs://${REPO}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "--- doctor"
lakectl doctor
lakectl repo create "$repo" "$NAMESPACE"

# A branch to work on, its source given as a URI.
lakectl branch create "$repo/denmark-lakes" --source "$repo/main"

printf 'id,name,country\n1,Esrum Sø,Denmark\n2,Furesø,Denmark\n' > "$work/lakes.csv"
lakectl fs upload "$repo/denmark-lakes/lakes.csv" --source "$work/lakes.csv"
lakectl fs ls "$repo/denmark-lakes/"
lakectl fs stat "$repo/denmark-lakes/lakes.csv"

echo "--- uncommitted"
lakectl diff "$repo/denmark-lakes"
lakectl commit "$repo/denmark-lakes" -m "Create a dataset of just the lakes in Denmark" --meta source=quickstart

echo "--- diff main..denmark-lakes"
lakectl diff "$repo/main" "$repo/denmark-lakes"
lakectl find-merge-base "$repo/denmark-lakes" "$repo/main"
lakectl merge "$repo/denmark-lakes" "$repo/main"

echo "--- log"
lakectl log --amount 1 "$repo/main"
lakectl log --amount 5 --objects lakes.csv "$repo/main"
lakectl show commit "$repo/main"

lakectl tag create "$repo/v1" "$repo/main"

echo "--- cat v1"
lakectl fs cat "$repo/v1/lakes.csv"
lakectl fs download "$repo/main/lakes.csv" "$work/back.csv"
cmp "$work/lakes.csv" "$work/back.csv"

# An uncommitted change, dropped: reset asks, and -y answers.
printf 'scratch\n' > "$work/scratch.txt"
lakectl fs upload "$repo/main/scratch.txt" -s "$work/scratch.txt"
lakectl branch reset "$repo/main" -y
echo "--- after reset"
lakectl diff "$repo/main"

lakectl branch delete "$repo/denmark-lakes" -y
echo "--- branches"
lakectl branch list "$repo"

# --- beyond the quickstart: the rest of lakectl's commands, each through the REST API alone.
echo "--- identity"
lakectl identity
echo "--- annotate"
lakectl annotate "$repo/main/"
lakectl actions runs list "$repo"

echo "--- bisect"
# Which commit brought lakes.csv into main? A run marks a commit good while the file is absent.
lakectl bisect start "$repo/main" "$repo/main~1"
lakectl bisect view
lakectl bisect run sh -c '! lakectl fs stat "lakefs://'"$REPO"'/$BISECT_ID/lakes.csv" >/dev/null 2>&1'
lakectl bisect log
lakectl bisect reset

echo "--- end"
