"""The slow tier: tests the default test command leaves out (``-m "not slow"``
in pyproject.toml's ``addopts``) and CI runs after it (``pytest -m slow``).

Whole modules that start processes or devices of their own, run every example
or fit real data sets, and the tests that took over about 6 s each on 2 idle
cores (12 s in a loaded run of the whole suite, 2026-12-07), most of it
compiling programs no other test shares.  `conftest.py` marks them.  A test
named here and renamed later falls back into the default tier: harmless, but
slower.
"""

# modules all of whose tests are slow: several processes or devices, the
# examples, real data sets, fresh processes reading the compilation cache
SLOW_MODULES = frozenset(
    {
        "test_compilation_cache",
        "test_dask",
        "test_devices_features",
        "test_distributed",
        "test_examples",
        "test_real_data",
    }
)

# module -> its slow tests (every parametrisation of each)
SLOW_TESTS = {
    "test_booster": (
        "test_bins_no_feature_uses_are_cut_and_the_model_is_unchanged",
        "test_second_order_splits_of_a_loss_without_curvature_warn_naming_the_setting",
    ),
    "test_categorical": (
        "test_interaction_constraints_hold_with_categorical_columns",
        "test_polars_categorical_and_enum_columns_are_categorical_and_matched_by_value",
        "test_save_and_load_keep_the_sets_and_the_codes",
        "test_vector_outputs_and_group_losses_split_on_sets",
    ),
    "test_categorical_native": ("test_a_categorical_fit_on_the_native_kernels_equals_the_xla_one",),
    "test_constraints": (
        "test_predictions_are_monotone_along_constrained_columns",
        "test_refit_leaves_keeps_monotone_models_monotone",
    ),
    "test_continued": (
        "test_more_rounds_are_bit_identical_in_optimised_code",
        "test_more_rounds_grow_the_trees_of_one_longer_fit",
    ),
    "test_derivatives": ("test_absolute_error_learns_zero_inflated_targets",),
    "test_devices": ("test_four_cpu_devices_train_the_single_device_model",),
    "test_distribution_defaults": (
        "test_diabetes_held_out_nll_at_defaults_beats_a_constant_gaussian",
        "test_the_defaults_apply_only_where_not_set",
    ),
    "test_distribution_losses": (
        "test_catalogue_families_fit_without_a_base_score",
        "test_censored_fit_at_defaults_keeps_its_scale",
    ),
    "test_group_fit": (
        "test_a_group_loss_equal_to_a_sum_of_sample_losses_grows_the_same_trees",
        "test_a_group_loss_s_row_derivatives_are_those_of_its_sum_over_groups",
        "test_a_group_loss_that_masks_and_the_catalogue_pass_the_padding_probe",
        "test_a_group_of_weight_two_is_the_group_twice_and_of_weight_zero_none",
        "test_groups_of_one_to_ten_thousand_rows_train_together",
        "test_listnet_learns_to_rank_and_ndcg_stops_early",
    ),
    "test_hard_losses": (
        "test_a_full_indefinite_hessian_turns_armijo_on",
        "test_newton_leaves_without_curvature_fall_back_to_a_line_search",
    ),
    "test_init_score": (
        "test_gaussian_nll_on_diabetes_starts_at_the_mean_and_log_std",
        "test_the_vector_search_over_two_shards_is_the_one_device_search",
        "test_the_catalogue_quantile_starts_at_its_closed_form_the_searchs_number",
    ),
    "test_leaf_regularisation": (
        "test_line_search_leaves_of_one_class_stay_finite",
        "test_newton_leaves_for_a_loss_without_curvature_warn",
    ),
    "test_bestfirst": ("test_without_max_depth_the_tree_is_deeper_than_the_depthwise_bound",),
    "test_leafwise": (
        "test_estimators_take_the_policy",
        "test_group_losses_grow_leafwise",
        "test_live_capacity_holds_every_node_best_first_growth_can_split",
        "test_live_node_histograms_keep_the_best_first_tree",
        "test_monotone_and_interaction_constraints_hold_on_pruned_trees",
        "test_splits_match_a_numpy_best_first_grower",
        "test_vector_outputs_grow_leafwise",
    ),
    "test_leaves": (
        "test_leaf_totals_give_the_search_its_start_and_armijo_its_base",
        "test_line_search_along_a_vector_direction",
        "test_line_search_gives_the_weighted_quantile_of_each_leaf",
    ),
    "test_min_child_samples": ("test_rows_of_zero_weight_do_not_count_and_vector_outputs_follow",),
    "test_monitor": (
        "test_a_callbacks_model_holds_the_rounds_grown_so_far_on_a_first_fit_and_a_refit",
        "test_eval_metrics_are_recorded_every_round_and_match_predictions",
    ),
    "test_monotone_intermediate": (
        "test_intermediate_frees_a_leaf_that_basic_holds_at_a_midpoint",
        "test_monotone_on_the_training_rows_and_the_packed_search",
        "test_monotone_with_a_categorical_column",
        "test_predictions_are_monotone_along_constrained_columns",
        "test_without_constraints_the_method_changes_nothing",
    ),
    "test_native_kernel": ("test_a_fresh_cache_builds_the_library_once",),
    "test_negative_binomial": (
        "test_fisher_matches_the_sampled_fisher_information",
        "test_under_dispersed_counts_fit_as_a_poisson",
    ),
    "test_packed_split": (
        "test_a_fit_on_few_valued_features_is_the_fit_without_packing",
        "test_constant_columns_are_left_out_and_the_trees_are_the_same",
        "test_every_kernel_grows_the_same_tree_packed",
    ),
    "test_precision": ("test_results_are_the_same_with_64_bit_mode_on",),
    "test_predict": ("test_forest_shapes",),
    "test_properties": (
        "test_integer_weights_equal_repeated_rows",
        "test_line_search_never_increases_the_training_loss",
    ),
    "test_quantise": (
        "test_quantised_training_with_other_algorithms",
        "test_quantised_training_with_vector_outputs_and_a_custom_loss",
    ),
    "test_ranker": (
        "test_a_lossguide_ranker_grows_trees_of_at_most_max_leaves",
        "test_grid_search_scores_rankers_by_ndcg_with_qid_routed_to_each_split",
        "test_the_ranker_is_the_booster_with_its_group_loss",
        "test_the_ranker_takes_categorical_columns_as_the_booster_does",
    ),
    "test_round_by_round": ("test_round_by_round_gives_the_fused_programs_model",),
    "test_round_checks": (
        "test_a_loss_that_overflows_only_in_float32_is_evaluated_in_float64",
        "test_a_newton_step_that_overshoots_its_own_rows_still_switches_armijo_on",
        "test_a_round_that_raises_the_loss_switches_armijo_on_once",
        "test_nan_gradients_at_the_initial_score_stop_the_fit_naming_the_cause",
        "test_nan_gradients_in_a_later_round_stop_the_fit_naming_that_round",
    ),
    "test_same_function": (
        "test_a_class_attribute_in_a_loop",
        "test_a_helper_reading_a_global",
    ),
    "test_tree": ("test_kernels_and_the_weight_column_give_the_same_tree",),
    "test_workarounds": (
        "test_small_fits_run_round_by_round_and_every_program_compiles_fast",
        "test_training_rounds_of_vector_outputs_take_the_options_on_many_rows",
    ),
}
