"""The reference design's measured outputs, checked by dbt tests (4-d demo vectors)."""

from __future__ import annotations

from recall_shim import MemoryStore


def test_seed_fidelity_dbt_tests_pass(fresh_store: MemoryStore) -> None:
    # one dbt build runs them: the data tests after the models they read, and each unit test after
    # the upstream relations whose column types it reads
    res = fresh_store.build()
    # 3 seed fidelity tests (ranking 0.996/0.444/0.351, multi-recall groups, decay and
    # reinforcement) + 3 unit tests (extraction rules, decay fold, recall ranking).
    assert "PASS=" in res.output
    for name in ("seed_fidelity_recall_ranking", "seed_fidelity_multi_recall", "seed_fidelity_decay",
                 "extraction_rules_cover_the_reference_design_and_english",
                 "strength_fold_is_a_function_of_events_and_as_of", "recall_ranks_the_reference_design_demo"):
        assert f"PASS {name}" in res.output.replace("PASS int_memories_extracted::", "PASS ").replace(
            "PASS int_memory_strength::", "PASS ").replace("PASS saved_recall_results::", "PASS "), name
    assert "FAIL" not in res.output and "ERROR=0" in res.output
