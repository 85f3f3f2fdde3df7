"""Write dbt-project-evaluator's exceptions seed from the reasons the project's YAML gives.

A model, source table or exposure documents a rule it breaks on purpose with
``config: {meta: {evaluator_exceptions: {<rule>: <reason>}}}`` in its own YAML; this script turns
those into the seed's rows (fct_name, column_name, id_to_exclude, comment), so that each reason is
written once, beside the resource. Used by scripts/evaluate_dbt.sh.

    python scripts/evaluator_exceptions.py MODELS_DIR OUT_CSV
"""

import csv
import pathlib
import sys

import yaml

#: evaluator rule -> the column of its fct_ table that names the resource
COLUMN = {
    "fct_model_naming_conventions": "resource_name",
    "fct_missing_primary_key_tests": "resource_name",
    "fct_too_many_joins": "resource_name",
    "fct_sources_without_freshness": "resource_name",
    "fct_multiple_sources_joined": "child",
    "fct_root_models": "child",
    "fct_source_fanout": "parent",
    "fct_rejoining_of_upstream_concepts": "parent_and_child",
    "fct_exposures_dependent_on_private_models": "exposure_name",
}


def exceptions(models_dir: pathlib.Path) -> list[list[str]]:
    """One row per (rule, resource) documented in a YAML file under models_dir."""
    rows = []
    for f in sorted(models_dir.rglob("*.yml")):
        doc = yaml.safe_load(f.read_text()) or {}
        found = [(n["name"], n) for key in ("models", "exposures") for n in doc.get(key) or []]
        found += [(f"{s['name']}.{t['name']}", t) for s in doc.get("sources") or [] for t in s.get("tables") or []]
        for name, node in found:
            meta = (node.get("config") or {}).get("meta") or {}
            for rule, why in (meta.get("evaluator_exceptions") or {}).items():
                if rule not in COLUMN:
                    raise SystemExit(f"{f}: {name}: no exception column known for evaluator rule {rule}")
                rows.append([rule, COLUMN[rule], name, " ".join(str(why).split())])
    return rows


def main() -> None:
    rows = exceptions(pathlib.Path(sys.argv[1]))
    with open(sys.argv[2], "w", newline="") as out:
        csv.writer(out).writerows([["fct_name", "column_name", "id_to_exclude", "comment"], *rows])
    print(f"{len(rows)} documented exceptions")


if __name__ == "__main__":
    main()
