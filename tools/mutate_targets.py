"""What ``tools/mutate.py`` mutates: per target, a module under ``src/posembed``, the functions
whose operators and constants change, and the fast tests that must kill each mutant.

A new target is one entry here; ``python tools/mutate.py --list NAME`` then shows its mutants.
"""

from __future__ import annotations

__all__ = ["TARGETS"]

#: name: (module file under src/posembed, functions to mutate ("*" = all), fast tests)
TARGETS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "positions": ("schemes/positions.py", ("*",), ("tests/test_positions.py",)),
    "sinusoidal": (
        "schemes/absolute/sinusoidal.py",
        ("check_sinusoid_args", "sinusoid_inv_freq", "_lay_out", "sinusoidal_table", "_within", "reset_parameters"),
        (
            "tests/schemes/test_formulas.py",
            "tests/schemes/test_sinusoidal.py",
            "-k",
            "not compiled and not linear_probe",
        ),
    ),
    "rotary": (
        "schemes/rotary/rope.py",
        ("rope_inv_freq",),
        ("tests/schemes/test_formulas.py", "tests/schemes/test_rotary.py", "-k", "not compiled"),
    ),
    "alibi": (
        "schemes/bias/alibi.py",
        ("alibi_slopes", "power_of_two", "alibi_bias"),
        ("tests/schemes/test_formulas.py", "tests/schemes/test_alibi.py"),
    ),
    "t5_bias": (
        "schemes/bias/t5.py",
        ("relative_position_bucket", "_check_bucket_config"),
        ("tests/schemes/test_formulas.py", "tests/schemes/test_t5_bias.py"),
    ),
    "relative": (
        "schemes/bias/relative.py",
        ("*",),
        (
            "tests/schemes/test_formulas.py",
            "tests/schemes/test_alibi.py",
            "tests/schemes/test_t5_bias.py",
            "tests/schemes/test_score_mod.py",
            "-k",
            "not compiled",
        ),
    ),
    "rotary_yarn": (
        "schemes/rotary/yarn.py",
        ("*",),
        (
            "tests/schemes/test_rotary_yarn.py",
            "tests/schemes/test_rotary_scaling.py",
            "tests/schemes/test_rotary_config.py",
        ),
    ),
    "passkey": ("lab/tasks/passkey.py", ("*",), ("tests/lab/test_passkey.py", "tests/lab/test_passkey_mutants.py")),
    "extend_methods": ("interop/extend/methods.py", ("*",), ("tests/interop/test_extend_methods.py",)),
    "extend_layout": (
        "interop/extend/layout.py",
        ("read_layout", "_check_family", "_offset", "_find_table", "positions"),
        ("tests/interop/test_extend.py", "-k", "not sentence_transformers and not finetune_tunes and not within_512"),
    ),
    "extend": (
        "interop/extend/checkpoint.py",
        (
            "extend_checkpoint",
            "_check_request",
            "_check_finetune",
            "_read_table",
            "_is_foreign",
            "_copy_others",
            "_grow",
            "_write_weights",
            "_shards_to_rewrite",
            "_rewrite_index",
            "_tensor_bytes",
            "_write_configs",
        ),
        ("tests/interop/test_extend.py", "-k", "not sentence_transformers and not finetune_tunes and not within_512"),
    ),
    "extend_finetune": (
        "interop/extend/finetune.py",
        ("tune_new_rows", "_check", "_pairs", "_embed", "_with_table"),
        ("tests/interop/test_extend_finetune.py",),
    ),
    "position_check": (
        "interop/extend/position_check.py",
        (
            "_is_causal",
            "_token_ids",
            "draw",
            "_recipe",
            "_position_kind",
            "_padded",
            "_diff",
            "_batch_results",
            "_packed_results",
            "check_positions",
            "ok",
            "format_position_report",
        ),
        ("tests/interop/test_position_check.py",),
    ),
    "retrieval": (
        "interop/extend/retrieval_embed.py",
        ("rank_scores", "_windows", "normalise"),
        ("tests/interop/test_retrieval.py", "-k", "rank_scores or pcw_windows or encoder_encodes or normalised"),
    ),
    "retrieval_report": (
        "interop/extend/retrieval_report.py",
        ("wilson", "chance"),
        ("tests/interop/test_retrieval.py", "-k", "chance or wilson or mcnemar"),
    ),
    "perplexity": ("lab/tasks/perplexity.py", ("*",), ("tests/lab/test_perplexity.py",)),
    "verdict_outcome": (
        "stats/verdict.py",
        ("_outcome", "winner", "claims", "word", "text", "details", "seeds_clause"),
        ("tests/test_stats.py", "-k", "not family_wise and not mcnemar_false and not statsmodels"),
    ),
    "report_verdicts": (
        "lab/report/rows.py",
        ("verdict_text", "decision_row"),
        (
            "tests/lab/test_report_questions.py",
            "tests/lab/test_report_design.py",
            "tests/lab/test_verdicts.py",
            "tests/test_readme_verdicts.py",
            "tests/test_lab_page.py",
            "-k",
            "not false_claim and not at_most_5_percent",
        ),
    ),
    "paper_checks": (
        "lab/report/calibration.py",
        ("_vaswani", "_press", "_kazemnejad"),
        (
            "tests/lab/test_report_questions.py",
            "tests/lab/test_report_design.py",
            "tests/test_readme_verdicts.py",
            "-k",
            "not at_most_5_percent",
        ),
    ),
    "worker_plan": (
        "lab/sweep/worker_plan.py",
        ("*",),
        ("tests/lab/test_worker_plan.py", "-k", "not runner_plans_when_workers"),
    ),
    "rope_traps": (
        "interop/rope_check/traps.py",
        ("*",),
        (  # the two slow tests (transformers' own configs, 35 s) left out: run them when a survivor is in doubt
            "tests/interop/test_rope_traps_mutants.py",
            "tests/interop/test_rope_check_traps.py",
            "-k",
            "not clean_configs_have_no_warnings and not factor_nothing_reads_is_a_warning",
        ),
    ),
    "context_evaluate": (
        "lab/context/evaluate.py",
        ("passkey_grid", "evaluate_rows"),
        (
            "tests/lab/test_perplexity.py",
            "tests/lab/test_context_evaluate.py",
            "tests/lab/test_context_curriculum.py",
            "tests/lab/test_context_device.py",
            "tests/lab/test_context.py",
        ),
    ),
}
