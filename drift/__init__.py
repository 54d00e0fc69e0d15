"""Vigil drift: pure statistics over arrays and frames (imports nothing from serving, storage,
alerts or dashboards).

Entry points:
    drift.run                    run_drift(baseline, frame, segment_by=..., rng_seed=...)
                                 -> DriftOutcome
    drift.registry               TestSpec, register(), get_test(name), all_tests(scope),
                                 tests_for(kind), decide() (tests: drift.stattests)
    drift.baseline.build         build_baseline(frame) -> Baseline; to_dict() / from_dict()
    drift.baseline.validate      validate_baseline(baseline) -> ValidationResult
                                 (first half vs second half)
    drift.baseline.calibrate     calibrate_baseline(baseline, window_size=...)
                                 (thresholds from its own noise)
    drift.alerting.custom_rules  DEFAULT_RULES, rules_from_dicts(), merge_rules()
    drift.alerting.proposals     propose_alerts(results, rules, sizes) -> [ProposedAlert]
    drift.features.templates     fit_templates(prompts) -> TemplateModel; model.label(prompts)
    drift.features.prompt_features  add_prompt_features(), new_template_result()
    drift.baseline.cluster_model fit_clusters() -> ClusterModel
    drift.detectors.clusters     detect_clusters(model, window_vectors)
    drift.errors                 InputError: the one exception for input drift cannot use
    drift.formatting             fmt_num(), clean_text(): text for any number or string

Folders: features/ (what a row carries), baseline/ (the reference, its levels and power),
stattests/ (the registered tests), detectors/ (what they wrap), streams/ (across windows),
alerting/ (results to proposals), cause/ (a run's cause in words).

Every other exception escaping the drift code is a bug: any window yields results or an
InputError that says what is wrong.
"""
