"""Early stopping on a validation set, with progress printed as it trains.

Fits binary log loss on scikit-learn's bundled breast-cancer data (569
tumours, 30 features) for up to 1000 rounds, watching log loss and AUC on a
validation split; training stops when the validation log loss has not
improved for 50 rounds and the model keeps its best round.  Prints
``best_iteration_`` and the test accuracy and AUC.
Run: ``python examples/early_stopping.py``.
"""

import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.metrics import accuracy_score, roc_auc_score
from sklearn.model_selection import train_test_split

import jaxboost as jb  # import before any JAX operation: exposes the CPU cores


def main() -> None:
    X, y = load_breast_cancer(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.25, stratify=y, random_state=0
    )
    X_fit, X_val, y_fit, y_val = train_test_split(
        X_train, y_train, test_size=0.25, stratify=y_train, random_state=0
    )

    model = jb.Booster(loss="binary_logloss", n_estimators=1000, learning_rate=0.05, max_depth=3)
    model.fit(
        X_fit,
        y_fit,
        eval_set=[(X_val, y_val)],
        eval_metric=["logloss", "auc"],  # the first one decides when to stop
        early_stopping_rounds=50,
        verbose=25,
    )
    print(f"best_iteration_: {model.best_iteration_} (of up to 1000 rounds)")
    print(f"best validation score: {model.best_score_}")
    p = model.predict(X_test)
    print(
        f"test accuracy {accuracy_score(y_test, p > 0.5):.4f}, test AUC {roc_auc_score(y_test, p):.4f} "
        f"({len(y_test)} tumours)"
    )
    print(f"trees kept: {model.forest_.feature.shape[0]}, n_estimators_ = {model.n_estimators_}")
    baseline = np.mean(y_test == np.round(y_fit.mean()))
    print(f"(majority-class accuracy: {baseline:.4f})")


if __name__ == "__main__":
    main()
