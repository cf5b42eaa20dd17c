// Path-dependent TreeSHAP contributions for jaxboost on CPU, through XLA's
// FFI.  The plain reference it must equal is jaxboost/engine/shap.py
// (forest_contributions), whose docstring gives the formulation: every
// tree's root-to-leaf paths (jaxboost/engine/node_table.py), splits on one
// feature merged into a group at the first of their steps; a path is a
// product game whose Shapley values are
//   phi_e = v (o_e - z_e) sum_k k! (m - 1 - k)! / m! e_k(others),
// e_k the coefficients of prod_{j != e} (z_j + o_j t), over its m groups.
// o is 0 or 1, so a path's values depend on the row only through its
// pattern of o bits: for a tree whose paths have few groups compared with
// the rows (2^m <= rows / 4), every pattern's values are tabulated once and
// each row looks its pattern up; otherwise each row's are computed.
// Weights in double.  Trees outermost, then blocks of rows, one thread.
//
// Shapes (row-major), T trees, P paths of S steps, K outputs:
//   X             (n_rows, n_features) float32, NaN for missing
//   node          (T, P, S) int32 the step's split (a node of the tree's
//                 table, -1 on padding steps): tested once per row
//   feature       (T, P, S) int32 the step's split feature
//   threshold     (T, P, S) float32 (+inf on padding steps)
//   missing_left  (T, P, S) bool (true on padding steps)
//   goes_right    (T, P, S) bool: the path's side
//   group         (T, P, S) int32: the step holding the group of this
//                 step's feature (itself for the group's first step)
//   zero_share    (T, P, S) float32: the group's product of cover shares at
//                 its step
//   value         (T, P, K) float32 the leaf's value (0 on padding paths)
//   category_left (T, P, S, 8) uint32, or (0,) without categorical features
//   result        (n_rows, n_features, K) float32: the sum over trees

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

constexpr int64_t kSetWords = 8;
constexpr int64_t kBlockRows = 64;
constexpr int kMaxGroups = 30;  // a pattern's bits fit an int32

// weights[e] = (o_e - z_e) sum_k k! (m - 1 - k)! / m! e_k(others) for the m
// groups of one path, o in {0, 1}.
void PathWeights(const double* o, const double* z, int m, const double* factor,
                 double* weights) {
  double coef[kMaxGroups + 2] = {1.0};
  for (int j = 0; j < m; ++j) {  // prod_j (z_j + o_j t), ascending powers
    coef[j + 1] = o[j] * coef[j];
    for (int k = j; k >= 1; --k) coef[k] = z[j] * coef[k] + o[j] * coef[k - 1];
    coef[0] *= z[j];
  }
  for (int e = 0; e < m; ++e) {
    if (o[e] == z[e]) {
      weights[e] = 0.0;
      continue;
    }
    double total = 0.0;
    if (o[e] == 1.0) {  // synthetic division by (t + z_e), from the top
      double q = coef[m];
      for (int k = m - 1; k >= 0; --k) {
        total += q * factor[k];
        q = coef[k] - z[e] * q;
      }
    } else {  // by z_e
      for (int k = 0; k < m; ++k) total += coef[k] * factor[k];
      total /= z[e];
    }
    weights[e] = (o[e] - z[e]) * total;
  }
}

// A split's test: a row goes right where GoesRight.
struct Test {
  int32_t feature;
  float threshold;
  bool missing_right;
  const uint32_t* set;  // null at numeric splits
};

// The quotient q (degree entries) of c (degree + 1 entries) by z + o t, o in {0, 1}.
inline void Divide(const double* c, int degree, double o, double z, double* q) {
  if (o == 1.0) {  // synthetic division by (t + z), from the top
    q[degree - 1] = c[degree];
    for (int k = degree - 1; k >= 1; --k) q[k - 1] = c[k] - z * q[k];
  } else {
    for (int k = 0; k < degree; ++k) q[k] = c[k] / z;
  }
}

// weights[i * stride + j] = (o_i - z_i)(o_j - z_j) / 2 sum_k k! (m - 2 - k)! /
// (m - 1)! e_k(others but i and j), 0 for i == j: the path's interaction
// values (factor: the weights of m - 1 players).
void PairWeights(const double* o, const double* z, int m, const double* factor, int stride,
                 double* weights) {
  double coef[kMaxGroups + 2] = {1.0}, without_j[kMaxGroups + 1], without_ij[kMaxGroups];
  for (int j = 0; j < m; ++j) {
    coef[j + 1] = o[j] * coef[j];
    for (int k = j; k >= 1; --k) coef[k] = z[j] * coef[k] + o[j] * coef[k - 1];
    coef[0] *= z[j];
  }
  for (int j = 0; j < m; ++j) {
    for (int i = 0; i < m; ++i) weights[i * stride + j] = 0.0;
    if (o[j] == z[j]) continue;
    Divide(coef, m, o[j], z[j], without_j);
    for (int i = 0; i < m; ++i) {
      if (i == j || o[i] == z[i]) continue;
      Divide(without_j, m - 1, o[i], z[i], without_ij);
      double total = 0.0;
      for (int k = 0; k < m - 1; ++k) total += without_ij[k] * factor[k];
      weights[i * stride + j] = 0.5 * (o[i] - z[i]) * (o[j] - z[j]) * total;
    }
  }
}

struct Step {
  int32_t test;  // the split's test among the tree's (the last: an inert step's)
  bool goes_right;
  int32_t group;  // index among the path's groups
};

// A tree's paths: each path's steps and groups, and the tests of its splits
// (each split tested once per row, however many paths pass it).
struct TreePaths {
  std::vector<Test> tests;
  std::vector<int32_t> test_of_node;   // the table's node -> its test, or -1
  std::vector<Step> steps;             // (P, S)
  std::vector<int32_t> n_groups;       // (P,)
  std::vector<int32_t> group_feature;  // (P, S)
  std::vector<double> group_share;     // (P, S)
  std::vector<const float*> value;     // (P,), null on paths of zero value
};

// Whether step i (of all the steps) has a non-empty category set.
inline bool IsSet(const uint32_t* sets, int64_t i) {
  if (sets == nullptr) return false;
  bool any = false;
  for (int64_t w = 0; w < kSetWords; ++w) any |= sets[i * kSetWords + w] != 0;
  return any;
}

inline bool GoesRight(const Test& test, float v) {
  if (std::isnan(v)) return test.missing_right;
  if (test.set != nullptr) {
    const int32_t code = static_cast<int32_t>(std::min(std::max(v, 0.0f), 255.0f));
    return ((test.set[code >> 5] >> (code & 31)) & 1) == 0;
  }
  return v > test.threshold;
}

// kPairs: the interaction values (n_rows, n_features, n_features, K), 0 on
// the diagonal, as jaxboost/engine/shap.py's forest_interactions; else the
// contributions (n_rows, n_features, K).
template <bool kPairs>
ffi::Error ShapImpl(ffi::Buffer<ffi::F32> X, ffi::Buffer<ffi::S32> node,
                    ffi::Buffer<ffi::S32> feature,
                    ffi::Buffer<ffi::F32> threshold, ffi::Buffer<ffi::PRED> missing_left,
                    ffi::Buffer<ffi::PRED> goes_right, ffi::Buffer<ffi::S32> group,
                    ffi::Buffer<ffi::F32> zero_share, ffi::Buffer<ffi::F32> value,
                    ffi::Buffer<ffi::U32> category_left, ffi::ResultBuffer<ffi::F32> result) {
  auto x_dims = X.dimensions();
  auto step_dims = feature.dimensions();
  auto value_dims = value.dimensions();
  if (x_dims.size() != 2 || step_dims.size() != 3 || value_dims.size() != 3) {
    return ffi::Error::InvalidArgument("jaxboost shap: bad ranks");
  }
  const int64_t n_rows = x_dims[0], n_features = x_dims[1];
  const int64_t n_trees = step_dims[0], n_paths = step_dims[1], n_steps = step_dims[2];
  const int64_t n_outputs = value_dims[2];
  const int64_t n_step_values = n_trees * n_paths * n_steps;
  if (value_dims[0] != n_trees || value_dims[1] != n_paths ||
      threshold.element_count() != n_step_values || missing_left.element_count() != n_step_values ||
      goes_right.element_count() != n_step_values || group.element_count() != n_step_values ||
      node.element_count() != n_step_values ||
      zero_share.element_count() != n_step_values) {
    return ffi::Error::InvalidArgument("jaxboost shap: path arrays disagree");
  }
  if (n_steps > kMaxGroups) {
    return ffi::Error::InvalidArgument("jaxboost shap: paths deeper than 30 splits");
  }
  const int32_t* features = feature.typed_data();
  const int32_t* groups = group.typed_data();
  const int32_t* nodes = node.typed_data();
  int32_t max_node = 0;
  for (int64_t i = 0; i < n_step_values; ++i) {
    if (features[i] < 0 || features[i] >= n_features || groups[i] < 0 || groups[i] >= n_steps) {
      return ffi::Error::InvalidArgument("jaxboost shap: feature or group out of range");
    }
    max_node = std::max(max_node, nodes[i]);
  }
  const int64_t n_set_words = category_left.element_count();
  if (n_set_words != 0 && n_set_words != n_step_values * kSetWords) {
    return ffi::Error::InvalidArgument("jaxboost shap: category_left not (T, P, S, 8)");
  }
  const uint32_t* sets = n_set_words ? category_left.typed_data() : nullptr;
  const float* x = X.typed_data();
  float* out = result->typed_data();
  const int64_t per_row = (kPairs ? n_features : 1) * n_features * n_outputs;
  std::fill(out, out + n_rows * per_row, 0.0f);
  // contributions summed in double; interactions (n_features times more) in
  // their float32 result
  std::vector<double> phi(kPairs ? 0 : n_rows * per_row, 0.0);

  std::vector<double> factor_of(static_cast<size_t>((kMaxGroups + 1) * (kMaxGroups + 1)));
  for (int m = 1; m <= kMaxGroups; ++m) {  // k! (m - 1 - k)! / m!
    for (int k = 0; k < m; ++k) {
      factor_of[m * (kMaxGroups + 1) + k] =
          std::exp(std::lgamma(k + 1.0) + std::lgamma(m - k + 0.0) - std::lgamma(m + 1.0));
    }
  }

  TreePaths tree;
  std::vector<double> table, weights(n_steps * n_steps);
  std::vector<uint8_t> right;
  double o[kMaxGroups], z[kMaxGroups];
  for (int64_t t = 0; t < n_trees; ++t) {
    // the tree's paths, their groups renumbered 0..m-1 in step order
    tree.tests.clear();
    tree.test_of_node.assign(max_node + 1, -1);
    tree.steps.assign(n_paths * n_steps, Step{});
    tree.n_groups.assign(n_paths, 0);
    tree.group_feature.assign(n_paths * n_steps, 0);
    tree.group_share.assign(n_paths * n_steps, 1.0);
    tree.value.assign(n_paths, nullptr);
    int max_groups = 0;
    for (int64_t p = 0; p < n_paths; ++p) {
      const int64_t base = (t * n_paths + p) * n_steps;
      const float* leaf = value.typed_data() + (t * n_paths + p) * n_outputs;
      bool nonzero = false;
      for (int64_t k = 0; k < n_outputs; ++k) nonzero |= leaf[k] != 0.0f;
      tree.value[p] = nonzero ? leaf : nullptr;
      int32_t index_of[kMaxGroups] = {0};
      int m = 0;
      for (int64_t s = 0; s < n_steps; ++s) {
        // a step that no row fails and of share 1 (padding) is a player
        // that changes nothing: left out
        const bool inert = !(threshold.typed_data()[base + s] < std::numeric_limits<float>::infinity()) &&
                           missing_left.typed_data()[base + s] &&
                           !goes_right.typed_data()[base + s] && !IsSet(sets, base + s) &&
                           zero_share.typed_data()[base + s] == 1.0f;
        if (groups[base + s] == s && !inert) {  // a group's first step: a new group
          index_of[s] = m;
          tree.group_feature[p * n_steps + m] = features[base + s];
          tree.group_share[p * n_steps + m] = zero_share.typed_data()[base + s];
          ++m;
        }
      }
      for (int64_t s = 0; s < n_steps; ++s) {
        const int32_t at = nodes[base + s];
        int32_t test = -1;  // padding: resolved to the inert test below
        if (at >= 0) {
          if (tree.test_of_node[at] < 0) {
            const uint32_t* set = IsSet(sets, base + s) ? sets + (base + s) * kSetWords : nullptr;
            tree.test_of_node[at] = static_cast<int32_t>(tree.tests.size());
            tree.tests.push_back(Test{features[base + s], threshold.typed_data()[base + s],
                                      !missing_left.typed_data()[base + s], set});
          }
          test = tree.test_of_node[at];
        }
        tree.steps[p * n_steps + s] =
            Step{test, goes_right.typed_data()[base + s] && at >= 0, index_of[groups[base + s]]};
      }
      tree.n_groups[p] = m;
      max_groups = std::max(max_groups, m);
    }
    // tabulated: every path's weights for each of the 2^m patterns
    const bool tabulate = (int64_t{4} << max_groups) <= n_rows;
    const int64_t n_patterns = int64_t{1} << max_groups;
    const int stride = max_groups;  // a pattern's entry: (m) or (m, m) in rows of max_groups
    const int64_t width = kPairs ? stride * stride : stride;
    // the path's weights for o from a pattern's bits, into w
    auto path_weights = [&](int64_t p, int32_t pattern, double* w) {
      const int m = tree.n_groups[p];
      for (int j = 0; j < m; ++j) {
        o[j] = static_cast<double>((pattern >> j) & 1);
        z[j] = tree.group_share[p * n_steps + j];
      }
      if constexpr (kPairs) {
        PairWeights(o, z, m, factor_of.data() + (m - 1) * (kMaxGroups + 1), stride, w);
      } else {
        PathWeights(o, z, m, factor_of.data() + m * (kMaxGroups + 1), w);
      }
    };
    if (tabulate) {
      table.assign(n_paths * n_patterns * width, 0.0);
      for (int64_t p = 0; p < n_paths; ++p) {
        const int m = tree.n_groups[p];
        if (tree.value[p] == nullptr || m == 0) continue;
        for (int64_t pattern = 0; pattern < (int64_t{1} << m); ++pattern) {
          path_weights(p, static_cast<int32_t>(pattern),
                       table.data() + (p * n_patterns + pattern) * width);
        }
      }
    }
    const int32_t inert = static_cast<int32_t>(tree.tests.size());
    for (Step& step : tree.steps) {
      if (step.test < 0) step.test = inert;  // "left", as the padding's side
    }
    // rows in blocks, path by path: a block's rows add to their own
    // features' sums, so the adds do not wait on one another
    right.assign((tree.tests.size() + 1) * kBlockRows, 0);
    for (int64_t first = 0; first < n_rows; first += kBlockRows) {
      const int64_t rows = std::min(kBlockRows, n_rows - first);
      const float* block = x + first * n_features;
      for (size_t c = 0; c < tree.tests.size(); ++c) {
        const Test& test = tree.tests[c];
        uint8_t* goes = right.data() + c * kBlockRows;
        for (int64_t r = 0; r < rows; ++r) goes[r] = GoesRight(test, block[r * n_features + test.feature]);
      }
      for (int64_t p = 0; p < n_paths; ++p) {
        const int m = tree.n_groups[p];
        if (tree.value[p] == nullptr || m == 0) continue;
        int32_t failed[kBlockRows] = {0};
        const Step* steps = tree.steps.data() + p * n_steps;
        for (int64_t s = 0; s < n_steps; ++s) {
          const uint8_t* goes = right.data() + steps[s].test * kBlockRows;
          const uint8_t side = steps[s].goes_right;
          const int32_t group = steps[s].group;
          for (int64_t r = 0; r < rows; ++r) failed[r] |= static_cast<int32_t>(goes[r] != side) << group;
        }
        const int32_t* group_feature = tree.group_feature.data() + p * n_steps;
        const float* leaf = tree.value[p];
        for (int64_t r = 0; r < rows; ++r) {
          const int32_t pattern = ~failed[r] & ((int32_t{1} << m) - 1);
          const double* w = weights.data();
          if (tabulate) {
            w = table.data() + (p * n_patterns + pattern) * width;
          } else {
            path_weights(p, pattern, weights.data());
          }
          if constexpr (kPairs) {
            float* row_pairs = out + (first + r) * per_row;
            for (int i = 0; i < m; ++i) {
              float* target_i = row_pairs + group_feature[i] * n_features * n_outputs;
              for (int j = 0; j < m; ++j) {
                const double weight = w[i * stride + j];
                if (weight == 0.0) continue;
                float* target = target_i + group_feature[j] * n_outputs;
                for (int64_t k = 0; k < n_outputs; ++k) target[k] += leaf[k] * weight;
              }
            }
          } else {
            double* row_phi = phi.data() + (first + r) * per_row;
            if (n_outputs == 1) {
              const double v = leaf[0];
              for (int j = 0; j < m; ++j) row_phi[group_feature[j]] += v * w[j];
            } else {
              for (int j = 0; j < m; ++j) {
                double* target = row_phi + group_feature[j] * n_outputs;
                for (int64_t k = 0; k < n_outputs; ++k) target[k] += leaf[k] * w[j];
              }
            }
          }
        }
      }
    }
  }
  for (size_t i = 0; i < phi.size(); ++i) out[i] = static_cast<float>(phi[i]);
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxboostShapContributions, ShapImpl<false>,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::PRED>>()
                                  .Arg<ffi::Buffer<ffi::PRED>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxboostShapInteractions, ShapImpl<true>,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::PRED>>()
                                  .Arg<ffi::Buffer<ffi::PRED>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>());
