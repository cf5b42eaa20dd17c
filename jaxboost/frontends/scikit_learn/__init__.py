"""The scikit-learn estimators around a `jaxboost.Booster`: `Regressor`,
`Classifier` (`estimators`) and `Ranker` (`ranker`), their input checks,
losses and section of a model file."""
