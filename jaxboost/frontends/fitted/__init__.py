"""The fitted model (`model.Model`, its fields `model_fields`): prediction,
distributions, SHAP values, inspection and plots, and its model file
(`model_file`)."""
