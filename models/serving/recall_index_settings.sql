{#- One row: the tunables of the serving index (recall_shim/serving/index.py, docs/serving.md). Publishing
    copies it into every snapshot, so the index is built with the settings of its build. -#}
select
    {{ number_var('recall_index_min_rows') }}::bigint as min_rows,
    {{ number_var('recall_index_nprobe') }}::bigint as nprobe,
    {{ number_var('recall_index_candidates') }}::bigint as candidates,
    {{ number_var('recall_index_ef_search') }}::bigint as ef_search,
    {{ number_var('recall_index_max_share') }}::{{ double_type() }} as max_share,
    {{ number_var('recall_index_lists_per_sqrt') }}::{{ double_type() }} as lists_per_sqrt,
    {{ number_var('recall_index_retrain_growth') }}::{{ double_type() }} as retrain_growth,
    {{ number_var('recall_index_compact_share') }}::{{ double_type() }} as compact_share,
    {{ number_var('recall_index_tail_share') }}::{{ double_type() }} as tail_share
