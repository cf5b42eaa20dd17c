"""One fit, from ``fit``'s arguments to a `jaxboost.frontends.fitted.model.Model`
(`fitting.fit_model`): the checked inputs, their placement and binning,
the initial score, the rounds loop and its monitor, the holdout's two fits."""
