"""4 simulated CPU devices equal 1 for leaf-wise growth, group losses,
offsets, continued training and categorical columns (the second part of
scripts/four_devices.py: a module of its own, so the test run's other
worker can take it)."""

from run_script import four_device_cases


def test_four_cpu_devices_train_the_single_device_model_with_the_tabular_features():
    assert four_device_cases(2) == [
        "lossguide",
        "lossguide_tables",
        "lossguide_bounded",
        "redescending",
        "groups",
        "groups_joint_newton",
        "offsets",
        "continued",
        "categorical",
        "categorical_multiclass",
    ]
