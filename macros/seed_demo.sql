{#- The reference design's three demo memories with its 4-d vectors (strength 1.0), in the
    long_term_memory column layout, for the seed fidelity tests. -#}
{% macro seed_demo_memories() -%}
select * from (values
    ('demo', 'seed_pref', 'preference', '用户偏好简洁输出、喜欢表格', {{ vector_literal('0.9, 0.1, 0.2, 0.0', 4) }}, 1.0, {{ text_list_literal("'s1-1'") }}, null::timestamp, false, '2026-01-01 09:00:00'::timestamp, null::date, null::varchar),
    ('demo', 'seed_fact', 'fact', '用户用 DuckDB 做过销售数据分析', {{ vector_literal('0.1, 0.8, 0.3, 0.1', 4) }}, 1.0, {{ text_list_literal("'s2-1'") }}, null::timestamp, false, '2026-01-01 09:00:00'::timestamp, null::date, null::varchar),
    ('demo', 'seed_skill', 'skill', '用户熟悉 Cloudflare Tunnel 部署', {{ vector_literal('0.2, 0.1, 0.9, 0.0', 4) }}, 1.0, {{ text_list_literal("'s3-1'") }}, null::timestamp, false, '2026-01-01 09:00:00'::timestamp, null::date, null::varchar),
    ('someone_else', 'other_pref', 'preference', '另一个用户的记忆', {{ vector_literal('0.85, 0.15, 0.20, 0.05', 4) }}, 1.0, {{ text_list_literal("'x-1'") }}, null::timestamp, false, '2026-01-01 09:00:00'::timestamp, null::date, null::varchar)
) as m (user_id, memory_id, kind, content, embedding, strength, source_message_ids, valid_to, is_question, created_at,
           happened_on, happened_grain)
{%- endmacro %}
