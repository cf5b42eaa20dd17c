"""The user's data checked and coded: features, targets and weights
(`validation`), categorical columns (`categories`), query groups
(`grouping`) and per-row offsets (`offsets`)."""
