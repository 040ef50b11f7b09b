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

echo "--- auth"
lakectl auth users create --id quickstart-analyst
lakectl auth groups create --id quickstart-readers
lakectl auth groups members add --id quickstart-readers --user quickstart-analyst
lakectl auth groups members list --id quickstart-readers
lakectl auth groups acl set --id quickstart-readers --permission Read
lakectl auth groups acl get --id quickstart-readers
lakectl auth users groups list --id quickstart-analyst
cat > "$work/policy.json" <<JSON
{"statement": [{"effect": "deny", "action": ["fs:DeleteRepository"], "resource": "arn:lakefs:fs:::repository/${REPO}"}]}
JSON
lakectl auth policies create --id quickstart-keep-repo --statement-document "$work/policy.json"
lakectl auth policies show --id quickstart-keep-repo
lakectl auth users policies attach --id quickstart-analyst --policy quickstart-keep-repo
lakectl auth users policies list --id quickstart-analyst
lakectl auth users policies detach --id quickstart-analyst --policy quickstart-keep-repo
lakectl auth users credentials create --id quickstart-analyst
lakectl auth users credentials list --id quickstart-analyst
lakectl auth groups members remove --id quickstart-readers --user quickstart-analyst
lakectl auth policies delete --id quickstart-keep-repo
lakectl auth users delete --id quickstart-analyst
lakectl auth groups delete --id quickstart-readers
echo "--- users"
lakectl auth users list

echo "--- gc"
printf '{"default_retention_days": 21, "branches": [{"branch_id": "main", "retention_days": 28}]}' > "$work/gc.json"
lakectl gc set-config "$repo" -f "$work/gc.json"
lakectl gc get-config "$repo"
lakectl gc get-config "$repo" -p
task="$(lakectl gc prepare-async "$repo" | sed -n 's/^Started prepare GC commits task \(.*\)\.$/\1/p')"
lakectl gc check-async "$repo" --id "$task"
lakectl gc delete-config "$repo"

echo "--- abuse"
lakectl abuse random-write "$repo/main" --prefix abuse/ --amount 20 --parallelism 4
printf 'abuse/file-%s\n' 0 1 2 3 4 > "$work/keys.txt"
lakectl abuse random-read "$repo/main" --from-file "$work/keys.txt" --amount 20 --parallelism 4
lakectl abuse list "$repo/main" --prefix abuse/ --amount 5 --parallelism 2
lakectl abuse link-same-object "$repo/main" --amount 10 --parallelism 5
lakectl abuse commit "$repo/main" --amount 2 --gap 10ms
lakectl abuse create-branches "$repo/main" --branch-prefix abuse- --amount 5 --parallelism 5
lakectl abuse create-branches "$repo/main" --branch-prefix abuse- --clean-only --parallelism 5
lakectl abuse merge "$repo/main" --amount 3 --parallelism 3
lakectl abuse random-delete "$repo/main" --from-file "$work/keys.txt" --amount 5 --parallelism 2
echo "--- end"
