"""Vigil drift: pure statistics over arrays and frames (imports nothing from serving, storage,
alerts or dashboards).

Entry points:
    drift.baseline   build_baseline(frame) -> Baseline; Baseline.to_dict() / Baseline.from_dict()
    drift.validate   validate_baseline(baseline) -> ValidationResult (first half vs second half)
    drift.calibrate  calibrate_baseline(baseline, window_size=...) (thresholds from its own noise)
    drift.run        run_drift(baseline, current_frame, segment_by=..., rng_seed=...)
                     -> DriftOutcome
    drift.custom_rules      DEFAULT_RULES, rules_from_dicts(), merge_rules()
    drift.registry   TestSpec, register(), get_test(name), tests_for(kind), decide()
                     (tests: drift.stattests)
    drift.proposals  propose_alerts(results, rules, sizes) -> [ProposedAlert]
    drift.templates  fit_templates(prompts) -> TemplateModel; model.label(prompts) -> ids
    drift.prompt_features  add_prompt_features(), new_template_result() (prompt wording)
    drift.cluster_model  fit_clusters() -> ClusterModel
    drift.clusters   detect_clusters(model, window_vectors)
    drift.errors     InputError: the one exception for input the drift code cannot use
    drift.formatting fmt_num(), clean_text(): text for any number (None/NaN/inf) or string

Every other exception escaping the drift code is a bug: any window yields results or an
InputError that says what is wrong.
"""
