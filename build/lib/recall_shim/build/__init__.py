"""Build-time code dbt calls: the dbt-duckdb plugin that registers embed(), LLM extraction for the Python model, and read-only access to a built warehouse."""
