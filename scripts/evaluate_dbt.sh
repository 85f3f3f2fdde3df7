#!/usr/bin/env bash
# Check the dbt project with dbt-project-evaluator, offline (docs/architecture.md "Checking the
# project with dbt-project-evaluator").
#
#   bash scripts/evaluate_dbt.sh PATH_TO_DBT_PROJECT_EVALUATOR PATH_TO_DBT_UTILS
#
# Both paths are plain checkouts of dbt-labs/dbt-project-evaluator and dbt-labs/dbt-utils. The
# project is copied to a temporary folder; only the copy gets a packages.yml (local: paths), the
# evaluator's DuckDB dispatch block and its exceptions seed, written by
# scripts/evaluator_exceptions.py from the reasons the project's YAML gives (config meta
# evaluator_exceptions on a model, source table or exposure). The working tree is never changed. Prints one
# line per evaluator rule with its number of violations; exits 1 when any rule has violations.
# Assumes scripts/setup.sh ran.
set -euo pipefail
if [ "$#" -ne 2 ]; then
  echo "usage: $0 PATH_TO_DBT_PROJECT_EVALUATOR PATH_TO_DBT_UTILS" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
evaluator=$(cd "$1" && pwd)
utils=$(cd "$2" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export OMP_WAIT_POLICY=passive DBT_SEND_ANONYMOUS_USAGE_STATS=false

# the project (dbt files only) and the two packages, the evaluator pointing at the local dbt-utils
mkdir -p "$scratch/project" "$scratch/packages"
(cd "$root" && cp -r dbt_project.yml profiles.yml models macros seeds tests analyses snapshots "$scratch/project/")
cp -r "$evaluator" "$scratch/packages/dbt_project_evaluator"
cp -r "$utils" "$scratch/packages/dbt_utils"
printf 'packages:\n  - local: %s\n' "$scratch/packages/dbt_utils" > "$scratch/packages/dbt_project_evaluator/packages.yml"
cat > "$scratch/project/packages.yml" <<EOF
packages:
  - local: $scratch/packages/dbt_project_evaluator
  - local: $scratch/packages/dbt_utils
EOF
# the evaluator's README: on DuckDB it overrides a few dbt macros; exceptions replace its seed
cat >> "$scratch/project/dbt_project.yml" <<'EOF'

dispatch:
  - macro_namespace: dbt
    search_order: ['dbt_project_evaluator', 'dbt']

seeds:
  dbt_project_evaluator:
    dbt_project_evaluator_exceptions:
      +enabled: false
EOF
"$root/.venv/bin/python" "$root/scripts/evaluator_exceptions.py" "$root/models" \
  "$scratch/project/seeds/dbt_project_evaluator_exceptions.csv"

cd "$scratch/project"
export AGENT_MEMORY_DB="$scratch/store/evaluate.duckdb" AGENT_MEMORY_INBOX="$scratch/store/evaluate.inbox"
export DBT_TARGET_PATH="$scratch/target" DBT_LOG_PATH="$scratch/logs"
mkdir -p "$scratch/store"
dbt=("$root/.venv/bin/dbt")
"${dbt[@]}" deps --project-dir . --profiles-dir . --quiet
set +e
"${dbt[@]}" build --project-dir . --profiles-dir . --quiet \
  --select package:dbt_project_evaluator dbt_project_evaluator_exceptions --warn-error-options '{"silence": ["Deprecations"]}' \
  > "$scratch/build.log" 2>&1
set -e
"$root/.venv/bin/python" - "$scratch/target/run_results.json" "$AGENT_MEMORY_DB" <<'EOF'
import json
import sys

import duckdb

results = json.load(open(sys.argv[1]))["results"]
bad = 0
for r in sorted(results, key=lambda r: r["unique_id"]):
    if not r["unique_id"].startswith("test."):
        if r["status"] not in ("success", "pass"):
            print(f"ERROR {r['unique_id']}: {r['status']} {r.get('message')}")
            bad += 1
        continue
    rule = r["unique_id"].split(".")[2]
    failures = r.get("failures") or 0
    bad += failures
    print(f"{failures:4d}  {rule}")
    if failures and rule.startswith("is_empty_fct_"):
        con = duckdb.connect(sys.argv[2], read_only=True)
        table = rule[len("is_empty_"):].rstrip("_")
        for row in con.execute(f"select * from {table}").fetchall():
            print("        ", *row)
        con.close()
print(f"violations: {bad}")
sys.exit(1 if bad else 0)
EOF
