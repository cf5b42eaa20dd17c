"""A fitted model written for other libraries: XGBoost's JSON and ONNX."""
