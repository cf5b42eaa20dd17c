"""A ranking loss of your own: ListNet written as a five-line JAX function.

Generates 300 queries of 5 to 40 documents whose relevance (0 to 4) depends
non-linearly on 8 features, fits the user-written ListNet and the
catalogue's LambdaRank with query groups, and prints the held-out NDCG@5
next to that of a random order.  Run: ``python examples/ranking_listnet.py``.
"""

import jax
import jax.numpy as jnp
import numpy as np

import jaxboost as jb  # import before any JAX operation: exposes the CPU cores
from jaxboost import losses
from jaxboost.engine.group_metrics import ndcg_at


@losses.declare(name="my_listnet", link="identity", per="group")
def my_listnet(y, f, mask):
    """Cross-entropy between the softmax of the labels and that of the scores."""
    target = jax.nn.softmax(jnp.where(mask, y, -jnp.inf))
    scores = jax.nn.log_softmax(jnp.where(mask, f, -jnp.inf))
    return -jnp.sum(jnp.where(mask, target * scores, 0.0))


def queries(n_queries: int, rng: np.random.Generator):
    """Features, relevance grades and query sizes of a synthetic data set."""
    sizes = rng.integers(5, 41, size=n_queries)
    X = rng.normal(size=(int(sizes.sum()), 8)).astype(np.float32)
    signal = X[:, 0] + np.sin(2 * X[:, 1]) + 0.5 * X[:, 2] * X[:, 3]
    relevance = np.digitize(signal + 0.5 * rng.normal(size=signal.size), [0.0, 1.0, 1.8, 2.5])
    return X, relevance.astype(np.float32), sizes


def mean_ndcg5(relevance: np.ndarray, scores: np.ndarray, sizes: np.ndarray) -> float:
    """Mean NDCG@5 over the queries, each padded to the largest (masked): one
    program for all of them, not one per query size."""
    width = int(sizes.max())
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    mask = np.arange(width)[None, :] < sizes[:, None]  # (n_queries, width)
    rows = np.where(mask, starts[:, None] + np.arange(width)[None, :], 0)
    ndcg5 = jax.jit(jax.vmap(ndcg_at(5)))
    return float(jnp.mean(ndcg5(relevance[rows], scores[rows], mask)))


def main() -> None:
    rng = np.random.default_rng(0)
    X, relevance, sizes = queries(300, rng)
    X_test, relevance_test, sizes_test = queries(100, rng)
    random_order = rng.normal(size=relevance_test.size)
    print(
        f"random order          test NDCG@5 {mean_ndcg5(relevance_test, random_order, sizes_test):.3f}"
    )
    for name, loss in [
        ("ListNet (yours)", my_listnet),
        ("LambdaRank (catalogue)", losses.lambdarank()),
    ]:
        model = jb.Booster(loss=loss, n_estimators=100, max_depth=4, learning_rate=0.1)
        model.fit(
            X,
            relevance,
            group=sizes,
            eval_set=[(X_test, relevance_test)],
            eval_group=[sizes_test],
            eval_metric="ndcg@5",
        )
        ndcg = mean_ndcg5(relevance_test, model.predict(X_test), sizes_test)
        recorded = model.evals_result_["validation_0"]["ndcg@5"][-1]
        print(f"{name:<24}test NDCG@5 {ndcg:.3f} (recorded during the fit: {recorded:.3f})")


if __name__ == "__main__":
    main()
