// The gain arithmetic of jaxboost's native split search (split_search.cc):
// the settings, a node's score, a child's least hessian by the row rule and
// one output's gain, each float32 operation the one
// jaxboost.engine.split.find_best_splits performs, in its order.

#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace jaxboost_split {

constexpr float kGainNoise = 1e-6f;
constexpr float kLeastRowShare = 1.0f / 1048576.0f;  // 2^-20
constexpr float kInf = std::numeric_limits<float>::infinity();

struct Settings {
  float reg_lambda, min_child_weight, min_split_gain, min_child_samples, rows_per_hessian,
      cat_smooth, max_cat_threshold;
};

// max as XLA's: NaN wins
inline float MaxNaN(float a, float b) {
  if (std::isnan(a)) return a;
  if (std::isnan(b)) return b;
  return a > b ? a : b;
}

template <int K>
struct Stats {
  const int n_outputs;
  int Count() const { return K > 0 ? K : n_outputs; }

  float Score(const float* s, float reg_lambda) const {
    const int k_max = Count();
    float total = 0.0f;
    for (int k = 0; k < k_max; ++k) {
      const float denominator = s[k_max + k] + reg_lambda;
      const float term = denominator > 0.0f ? s[k] * s[k] / denominator : 0.0f;
      total = k == 0 ? term : total + term;
    }
    return total;
  }

  float Hessian(const float* s) const {
    const int k_max = Count();
    float total = s[k_max];
    for (int k = 1; k < k_max; ++k) total = total + s[k_max + k];
    return total;
  }
};

// the least hessian sum of a child (jaxboost.engine.split.child_check)
inline float LeastHessian(const Settings& set, int row_rule, float min_child_samples,
                   float rows_per_hessian) {
  if (row_rule == 0) return set.min_child_weight;
  const float least_rows = std::fmax(std::ceil(min_child_samples), 1.0f) - 0.5f;
  const float least_rows_hessian = rows_per_hessian > 0.0f ? least_rows / rows_per_hessian : kInf;
  return MaxNaN(set.min_child_weight, least_rows_hessian);
}

// The least hessian of a child of a node whose feature totals hess_total
// (summed over outputs), by the row rule (jaxboost.engine.split.child_check
// and estimated_row_rule).
inline float ChildLeast(const Settings& set, int row_rule, float hess_total, float node_rows) {
  if (row_rule == 1) return LeastHessian(set, 1, set.min_child_samples, set.rows_per_hessian);
  if (row_rule != 2) return set.min_child_weight;
  const float per_hessian = hess_total > 0.0f ? node_rows / hess_total : 0.0f;
  const float least_samples = MaxNaN(set.min_child_samples, node_rows * kLeastRowShare);
  return LeastHessian(set, 2, least_samples, per_hessian);
}

// One output's gain of a left side (g, h) of a node: SideGains' loop over a
// feature's thresholds (vectorised there), and the packed search's recomputed
// gains of its chosen feature.
__attribute__((always_inline, optimize("no-trapping-math"))) inline float OneGain(
    float g, float h, float total_grad, float total_hess, float total_score,
                     float least, float reg_lambda) {
  const float gr = total_grad - g, hr = total_hess - h;
  const float dl = h + reg_lambda, dr = hr + reg_lambda;
  const float ql = g * g / (dl > 0.0f ? dl : 1.0f);
  const float qr = gr * gr / (dr > 0.0f ? dr : 1.0f);
  const float sl = dl > 0.0f ? ql : 0.0f, sr = dr > 0.0f ? qr : 0.0f;
  const float gain = 0.5f * (sl + sr - total_score);
  return (h >= least) & (hr >= least) ? gain : -kInf;
}

}  // namespace jaxboost_split
