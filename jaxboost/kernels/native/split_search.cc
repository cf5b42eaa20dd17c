// The best split of every node of a level on CPU, called from XLA through
// its FFI (jaxboost.engine.native_split).  Built with the other kernels by
// jaxboost/kernels/native_build.py; the search it must equal, choice for
// choice, is jaxboost.engine.split.find_best_splits (padded histograms,
// cumulative=True) or jaxboost.engine.packed_split.find_best_packed_splits
// (packed), for numeric features, and categorical ones on padded histograms
// (find_best_splits with a CategoricalSearch sorted natively: category_split.h),
// without constraints.
//
// XLA compiles its search into hundreds of operations per level, each level
// a copy: most of a tree program's compile, and on small tables most of a
// round (passes over every candidate, one for the gains, one for the maximum,
// one for the first tie).  Here one loop per node computes every candidate's
// gain once, keeps them, and picks the first within float32 noise of the best
// (packed histograms of one output: one loop per feature over every node,
// the nodes side by side as the histograms hold them, then the first
// feature within noise of a node's best searched again: PackedOneOutput).
//
// Every float32 operation is the one find_best_splits performs, in its order
// (gains bit for bit): score(s) = sum_k [h_k + lambda > 0] g_k^2 / (h_k +
// lambda), summed k = 0, 1, ...; gain = 0.5 (score(left) + score(right) -
// score(total)); the tie bound top - 1e-6 (|top| + parent) with one rounding,
// as XLA's CPU backend contracts it into a fused multiply-add.
//
//   JaxboostSplitSearch(hist, feature_ok, slot_start, node_rows, settings)
//     hist        padded: (F, N, B, C) float32, running sums over the
//                 B - 1 value bins, then the missing bin; packed: (S, N, C),
//                 feature f's running sums in slots slot_start[f] ..
//                 slot_start[f + 1] - 2 and its missing bin in the next; the
//                 channels [grad (K), hess (K)], then any others (unread)
//     feature_ok  (F,) uint8: 0 a feature the tree may not use, else 1
//                 numeric, 2 categorical (category sets), 3 categorical (one
//                 category against the rest; both padded only)
//     slot_start  (F + 1,) int32 (packed; ignored when padded)
//     node_rows   (N,) float32: each node's rows of positive weight (row
//                 rule 2), else ignored
//     settings    (7,) float32: reg_lambda, min_child_weight,
//                 min_split_gain, min_child_samples, rows_per_hessian,
//                 cat_smooth, max_cat_threshold
//   attributes n_outputs (K), packed (0/1), row_rule: 0 none, 1 every row's
//   hessian the same (rows_per_hessian), 2 estimated from node_rows
//   (jaxboost.engine.split.estimated_row_rule)
//   results (N,) each: feature int32, threshold_bin int32, missing_left
//   int32, gain float32 (0 where the node does not split), do_split int32;
//   category_left (N, 8) uint32: a categorical split's bins sent left (bit
//   b % 32 of word b / 32), 0 elsewhere

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "category_split.h"
#include "split_gain.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;
using jaxboost_category::CategoryBuffers, jaxboost_category::kBitsetWords,
    jaxboost_category::kCategorySets, jaxboost_category::kOneHot;

namespace {

using namespace jaxboost_split;  // NOLINT: the gain arithmetic (split_gain.h)

// One feature of one node: the gains of its thresholds 0 .. n_thresholds - 1
// (the running sums at left + t * pitch), missing right then left, into
// gains[d n_thresholds + t]; returns the largest.  A node whose missing bin is empty
// gains as much sending it left as right, and that comes second: never
// chosen, so -inf.
template <int K>
float FeatureGains(const Stats<K>& st, const float* left, int64_t pitch, int64_t n_thresholds,
                   const float* missing, const float* total, float least, float reg_lambda,
                   float* gains) {
  constexpr int kMax = K > 0 ? 2 * K : 128;
  const int c = 2 * st.Count();
  bool has_missing = false;
  for (int i = 0; i < c; ++i) has_missing |= missing[i] != 0.0f;
  const float total_score = st.Score(total, reg_lambda);
  float top = -kInf;
  float side[kMax], right[kMax];
  for (int64_t t = 0; t < n_thresholds; ++t) {
    const float* at = left + t * pitch;
    for (int d = 0; d < 2; ++d) {
      float gain = -kInf;
      if (d == 0 || has_missing) {
        for (int i = 0; i < c; ++i) {
          side[i] = d == 0 ? at[i] : at[i] + missing[i];
          right[i] = total[i] - side[i];
        }
        if (st.Hessian(side) >= least && st.Hessian(right) >= least) {
          gain = 0.5f * (st.Score(side, reg_lambda) + st.Score(right, reg_lambda) - total_score);
        }
      }
      gains[d * n_thresholds + t] = gain;
      top = MaxNaN(top, gain);
    }
  }
  return top;
}

// The gains of one output's thresholds, ``sums`` their running sums
// [grad, hess] side by side, with the missing bin's (add_*: 0 for missing
// right; adding 0 changes at most a zero's sign, which no gain sees) on the
// left side, into out; returns the largest, NaN if one is.  Branch-free, so
// that the compiler vectorises it: an AVX2 copy where the CPU has AVX2 (no
// FMA, which would round the gains differently).
__attribute__((target_clones("avx2", "default"), optimize("no-trapping-math"))) float SideGains(
    const float* __restrict sums, float add_grad, float add_hess, float total_grad,
    float total_hess, float total_score, float least, float reg_lambda, int64_t n_thresholds,
    float* __restrict out) {
  // the largest as the largest order key of the floats' bits (an integer
  // maximum, which vectorises); NaN apart
  int32_t top = std::numeric_limits<int32_t>::min();
  int bad = 0;
  for (int64_t t = 0; t < n_thresholds; ++t) {
    const float value = OneGain(sums[2 * t] + add_grad, sums[2 * t + 1] + add_hess, total_grad,
                                total_hess, total_score, least, reg_lambda);
    out[t] = value;
    int32_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    const int32_t key = bits ^ ((bits >> 31) & 0x7fffffff);
    top = key > top ? key : top;
    bad |= value != value;
  }
  if (bad) return std::numeric_limits<float>::quiet_NaN();
  const int32_t bits = top ^ ((top >> 31) & 0x7fffffff);
  float largest;
  std::memcpy(&largest, &bits, sizeof largest);
  return largest;
}

// FeatureGains of one output, into gains[t] (missing right) and
// gains[n_thresholds + t] (left); scratch holds 2 n_thresholds floats.
float FeatureGainsOne(const float* left, int64_t pitch, int64_t n_thresholds,
                      const float* missing, const float* total, float least, float reg_lambda,
                      float* gains, float* scratch) {
  const float* sums = left;
  if (pitch != 2) {
    for (int64_t t = 0; t < n_thresholds; ++t) {
      scratch[2 * t] = left[t * pitch];
      scratch[2 * t + 1] = left[t * pitch + 1];
    }
    sums = scratch;
  }
  const float total_grad = total[0], total_hess = total[1];
  const float total_denominator = total_hess + reg_lambda;
  const float total_score =
      total_denominator > 0.0f ? total_grad * total_grad / total_denominator : 0.0f;
  float top = SideGains(sums, 0.0f, 0.0f, total_grad, total_hess, total_score, least,
                        reg_lambda, n_thresholds, gains);
  float* second = gains + n_thresholds;
  if (missing[0] != 0.0f || missing[1] != 0.0f) {
    top = MaxNaN(top, SideGains(sums, missing[0], missing[1], total_grad, total_hess,
                                total_score, least, reg_lambda, n_thresholds, second));
  } else {
    for (int64_t t = 0; t < n_thresholds; ++t) second[t] = -kInf;
  }
  return top;
}

struct Choice {
  int32_t feature = 0, threshold_bin = 0, missing_left = 0, do_split = 0;
  float gain = 0.0f;
  uint32_t category_left[kBitsetWords] = {};  // a categorical split's bins sent left
};

template <int K>
Choice SearchNode(const float* hist, const uint8_t* feature_ok, const int32_t* slot_start,
                  bool packed, int64_t n_features, int64_t n_nodes, int64_t n_bins,
                  int64_t channels, int64_t node,
                  float node_rows, int row_rule, const Settings& set, int n_outputs,
                  std::vector<float>& gains, std::vector<int64_t>& offset,
                  std::vector<float>& scratch, std::vector<float>& feature_top,
                  CategoryBuffers& category) {
  const Stats<K> st{n_outputs};
  const int c = 2 * st.Count();  // the channels read: [grad (K), hess (K)]
  float total[128];
  float parent = -kInf, top = -kInf;
  for (int64_t f = 0; f < n_features; ++f) {
    const float *left, *missing;
    int64_t pitch, n_thresholds;
    if (packed) {
      pitch = n_nodes * channels;
      left = hist + slot_start[f] * pitch + node * channels;
      n_thresholds = slot_start[f + 1] - slot_start[f] - 1;
    } else {
      pitch = channels;
      left = hist + (f * n_nodes + node) * n_bins * channels;
      n_thresholds = n_bins - 1;
    }
    missing = left + n_thresholds * pitch;
    const float* last = left + (n_thresholds - 1) * pitch;
    for (int i = 0; i < c; ++i) total[i] = last[i] + missing[i];
    parent = MaxNaN(parent, st.Score(total, set.reg_lambda));
    float least = set.min_child_weight;
    if (row_rule == 1) {
      least = LeastHessian(set, 1, set.min_child_samples, set.rows_per_hessian);
    } else if (row_rule == 2) {
      const float hess_total = st.Hessian(total);
      const float per_hessian = hess_total > 0.0f ? node_rows / hess_total : 0.0f;
      const float least_samples = MaxNaN(set.min_child_samples, node_rows * kLeastRowShare);
      least = LeastHessian(set, 2, least_samples, per_hessian);
    }
    offset[f] = f == 0 ? 0 : offset[f - 1];
    float* at = gains.data() + offset[f];
    offset[f] += 2 * n_thresholds;
    feature_top[f] = -kInf;
    if (!feature_ok[f]) {
      for (int64_t i = 0; i < 2 * n_thresholds; ++i) at[i] = -kInf;
      continue;
    }
    const bool categorical = feature_ok[f] >= kCategorySets;
    const float* candidates = left;
    int64_t candidate_pitch = pitch;
    if (categorical) {  // (padded histograms: n_thresholds is every feature's)
      jaxboost_category::CategoryCandidates(
          left, pitch, n_thresholds, st.Count(), feature_ok[f] == kOneHot, set.cat_smooth,
          static_cast<int64_t>(set.max_cat_threshold), category.scratch, category.left.data(),
          category.valid.data(), category.order.data() + f * n_thresholds);
      candidates = category.left.data();
      candidate_pitch = c;
    }
    feature_top[f] =
        K == 1 ? FeatureGainsOne(candidates, candidate_pitch, n_thresholds, missing, total, least,
                                 set.reg_lambda, at, scratch.data())
               : FeatureGains<K>(st, candidates, candidate_pitch, n_thresholds, missing, total,
                                 least, set.reg_lambda, at);
    if (categorical) feature_top[f] = category.Mask(n_thresholds, at);
    top = MaxNaN(top, feature_top[f]);
  }
  parent = 0.5f * parent;
  const float least = std::fma(-kGainNoise, std::fabs(top) + parent, top);
  // the first candidate at least `least`: in the first feature whose best is
  // (the others are not read again)
  Choice choice;
  float best = -kInf;
  for (int64_t f = 0; f < n_features; ++f) {
    if (!(feature_top[f] >= least)) continue;
    const int64_t start = f == 0 ? 0 : offset[f - 1];
    const int64_t n_thresholds = (offset[f] - start) / 2;
    const float* first = gains.data() + start;
    const float* second = first + n_thresholds;
    for (int64_t t = 0; t < n_thresholds; ++t) {
      const int d = first[t] >= least ? 0 : second[t] >= least ? 1 : -1;
      if (d < 0) continue;
      best = d == 0 ? first[t] : second[t];
      choice.feature = static_cast<int32_t>(f);
      choice.threshold_bin = static_cast<int32_t>(t);
      choice.missing_left = d;
      break;
    }
    break;
  }
  const float noise = kGainNoise * parent;
  const bool split = std::isfinite(best) && best > set.min_split_gain && best > noise;
  choice.do_split = split;
  choice.gain = split ? best : 0.0f;
  if (split && feature_ok[choice.feature] >= kCategorySets) {
    category.Chosen(choice.feature, n_bins - 1, feature_ok[choice.feature] == kOneHot,
                    choice.threshold_bin, choice.category_left);
  }
  return choice;
}

// A packed feature's best gain in each of n_nodes nodes, the nodes side by
// side in the inner loop (they lie side by side in the packed histograms,
// two channels each);
// both directions where with_missing.  Order keys as in SideGains.
__attribute__((target_clones("avx2", "default"), optimize("no-trapping-math"))) void NodeTops(
    const float* __restrict sums, int64_t n_nodes, int64_t n_thresholds,
    const float* __restrict missing, const float* __restrict total_grad,
    const float* __restrict total_hess, const float* __restrict total_score,
    const float* __restrict least, float reg_lambda, bool with_missing,
    int32_t* __restrict top, int32_t* __restrict bad) {
  // (two loops, not a branch inside one: the compiler vectorises neither)
  if (!with_missing) {
    for (int64_t t = 0; t < n_thresholds; ++t) {
      const float* __restrict row = sums + t * n_nodes * 2;
      for (int64_t n = 0; n < n_nodes; ++n) {
        const float value = OneGain(row[2 * n], row[2 * n + 1], total_grad[n],
                                    total_hess[n], total_score[n], least[n], reg_lambda);
        bad[n] |= value != value;
        int32_t bits;
        std::memcpy(&bits, &value, sizeof bits);
        const int32_t key = bits ^ ((bits >> 31) & 0x7fffffff);
        top[n] = key > top[n] ? key : top[n];
      }
    }
    return;
  }
  for (int64_t t = 0; t < n_thresholds; ++t) {
    const float* __restrict row = sums + t * n_nodes * 2;
    for (int64_t n = 0; n < n_nodes; ++n) {
      const float g = row[2 * n], h = row[2 * n + 1];
      const float right = OneGain(g, h, total_grad[n], total_hess[n], total_score[n], least[n],
                                  reg_lambda);
      const float left =
          OneGain(g + missing[2 * n], h + missing[2 * n + 1], total_grad[n],
                  total_hess[n], total_score[n], least[n], reg_lambda);
      bad[n] |= (right != right) | (left != left);
      int32_t right_bits, left_bits;
      std::memcpy(&right_bits, &right, sizeof right_bits);
      std::memcpy(&left_bits, &left, sizeof left_bits);
      const int32_t right_key = right_bits ^ ((right_bits >> 31) & 0x7fffffff);
      const int32_t left_key = left_bits ^ ((left_bits >> 31) & 0x7fffffff);
      const int32_t key = right_key > left_key ? right_key : left_key;
      top[n] = key > top[n] ? key : top[n];
    }
  }
}

float FromKey(int32_t key) {
  const int32_t bits = key ^ ((key >> 31) & 0x7fffffff);
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// The packed search of one output: every feature's best in every node
// (NodeTops), then per node the first candidate within noise of its best,
// in the first feature that has one, its gains computed again.
void PackedOneOutput(const float* hist, const uint8_t* feature_ok, const int32_t* slot_start,
                     int64_t n_features, int64_t n_nodes, int64_t channels,
                     const float* node_rows, int row_rule, const Settings& set, Choice* out) {
  const int64_t pitch = n_nodes * channels;
  std::vector<float> feature_top(n_features * n_nodes), parent(n_nodes, -kInf),
      top(n_nodes, -kInf), grad(n_nodes), hess(n_nodes), score(n_nodes), least(n_nodes);
  std::vector<int32_t> keys(n_nodes), bad(n_nodes);
  for (int64_t f = 0; f < n_features; ++f) {
    const int64_t n_thresholds = slot_start[f + 1] - slot_start[f] - 1;
    const float* left = hist + slot_start[f] * pitch;
    const float* missing = left + n_thresholds * pitch;
    const float* last = missing - pitch;
    bool with_missing = false;
    for (int64_t n = 0; n < n_nodes; ++n) {
      const float* m = missing + n * channels;
      with_missing |= m[0] != 0.0f || m[1] != 0.0f;
      grad[n] = last[n * channels] + m[0];
      hess[n] = last[n * channels + 1] + m[1];
      const float denominator = hess[n] + set.reg_lambda;
      score[n] = denominator > 0.0f ? grad[n] * grad[n] / denominator : 0.0f;
      parent[n] = MaxNaN(parent[n], score[n]);
      least[n] = ChildLeast(set, row_rule, hess[n], node_rows[n]);
      keys[n] = std::numeric_limits<int32_t>::min();
      bad[n] = 0;
    }
    float* at = feature_top.data() + f * n_nodes;
    if (!feature_ok[f]) {
      for (int64_t n = 0; n < n_nodes; ++n) at[n] = -kInf;
      continue;
    }
    NodeTops(left, n_nodes, n_thresholds, missing, grad.data(), hess.data(),
             score.data(), least.data(), set.reg_lambda, with_missing, keys.data(), bad.data());
    for (int64_t n = 0; n < n_nodes; ++n) {
      at[n] = bad[n] ? std::numeric_limits<float>::quiet_NaN() : FromKey(keys[n]);
      top[n] = MaxNaN(top[n], at[n]);
    }
  }
  for (int64_t n = 0; n < n_nodes; ++n) {
    const float half_parent = 0.5f * parent[n];
    const float bound = std::fma(-kGainNoise, std::fabs(top[n]) + half_parent, top[n]);
    Choice choice;
    float best = -kInf;
    for (int64_t f = 0; f < n_features; ++f) {
      if (!(feature_top[f * n_nodes + n] >= bound)) continue;
      const int64_t n_thresholds = slot_start[f + 1] - slot_start[f] - 1;
      const float* left = hist + slot_start[f] * pitch + n * channels;
      const float* m = left + n_thresholds * pitch;
      const float* last = m - pitch;
      const float total_grad = last[0] + m[0], total_hess = last[1] + m[1];
      const float denominator = total_hess + set.reg_lambda;
      const float total_score =
          denominator > 0.0f ? total_grad * total_grad / denominator : 0.0f;
      const float child_least = ChildLeast(set, row_rule, total_hess, node_rows[n]);
      for (int64_t t = 0; t < n_thresholds; ++t) {
        const float g = left[t * pitch], h = left[t * pitch + 1];
        const float right_missing =
            feature_ok[f] ? OneGain(g, h, total_grad, total_hess, total_score, child_least,
                                    set.reg_lambda)
                          : -kInf;
        const float left_missing =
            feature_ok[f] ? OneGain(g + m[0], h + m[1], total_grad, total_hess, total_score,
                                    child_least, set.reg_lambda)
                          : -kInf;
        const int d = right_missing >= bound ? 0 : left_missing >= bound ? 1 : -1;
        if (d < 0) continue;
        best = d == 0 ? right_missing : left_missing;
        choice.feature = static_cast<int32_t>(f);
        choice.threshold_bin = static_cast<int32_t>(t);
        choice.missing_left = d;
        break;
      }
      break;
    }
    const bool split =
        std::isfinite(best) && best > set.min_split_gain && best > kGainNoise * half_parent;
    choice.do_split = split;
    choice.gain = split ? best : 0.0f;
    out[n] = choice;
  }
}

ffi::Error SplitSearchImpl(ffi::Buffer<ffi::F32> hist, ffi::Buffer<ffi::U8> feature_ok,
                           ffi::Buffer<ffi::S32> slot_start, ffi::Buffer<ffi::F32> node_rows,
                           ffi::Buffer<ffi::F32> settings, int64_t n_outputs, int64_t packed,
                           int64_t row_rule, ffi::ResultBuffer<ffi::S32> feature,
                           ffi::ResultBuffer<ffi::S32> threshold_bin,
                           ffi::ResultBuffer<ffi::S32> missing_left,
                           ffi::ResultBuffer<ffi::F32> gain, ffi::ResultBuffer<ffi::S32> do_split,
                           ffi::ResultBuffer<ffi::U32> category_left) {
  auto dims = hist.dimensions();
  const int64_t n_features = feature_ok.element_count();
  const int64_t c = 2 * n_outputs;
  if (n_outputs < 1 || n_outputs > 64 || settings.element_count() != 7) {
    return ffi::Error::InvalidArgument("jaxboost split search: bad outputs or settings");
  }
  int64_t n_nodes, n_bins = 0;
  const int32_t* slots = slot_start.typed_data();
  if (packed) {
    if (dims.size() != 3 || dims[2] < c || slot_start.element_count() != n_features + 1) {
      return ffi::Error::InvalidArgument("jaxboost split search: bad packed histograms");
    }
    n_nodes = dims[1];
    for (int64_t f = 0; f < n_features; ++f) {
      if (slots[f + 1] - slots[f] < 2 || slots[f + 1] > dims[0] || slots[f] < 0) {
        return ffi::Error::InvalidArgument("jaxboost split search: bad slot_start");
      }
    }
  } else {
    if (dims.size() != 4 || dims[0] != n_features || dims[3] < c || dims[2] < 2) {
      return ffi::Error::InvalidArgument("jaxboost split search: bad histograms");
    }
    n_nodes = dims[1];
    n_bins = dims[2];
  }
  if (node_rows.element_count() != n_nodes ||
      category_left->element_count() != n_nodes * kBitsetWords) {
    return ffi::Error::InvalidArgument("jaxboost split search: node_rows or category_left");
  }
  bool any_categorical = false;
  for (int64_t f = 0; f < n_features; ++f) {
    any_categorical |= feature_ok.typed_data()[f] >= kCategorySets;
  }
  if (any_categorical && (packed || n_bins - 1 > 32 * kBitsetWords)) {
    return ffi::Error::InvalidArgument(
        "jaxboost split search: categorical features need padded histograms of <= 256 bins");
  }
  const float* s = settings.typed_data();
  const Settings set{s[0], s[1], s[2], s[3], s[4], s[5], s[6]};
  CategoryBuffers category;
  if (any_categorical) {
    category.left.resize((n_bins - 1) * c);
    category.valid.resize(n_bins - 1);
    category.order.resize(n_features * (n_bins - 1));
  }
  uint32_t* bitsets = category_left->typed_data();
  std::fill(bitsets, bitsets + n_nodes * kBitsetWords, 0u);
  const int64_t n_gains = packed ? 2 * (slots[n_features] - n_features) : 2 * n_features * (n_bins - 1);
  std::vector<float> gains(n_gains);
  std::vector<int64_t> offset(n_features);
  std::vector<float> scratch(std::max<int64_t>(n_gains, 2));
  std::vector<float> feature_top(n_features);
  // packed histograms node by node: (S, N, C) -> (N, S, 2K) in one pass,
  // so that a node's search reads its sums side by side (read in place, a
  // node's slots lie N C floats apart: a cache line each)
  const float* source = hist.typed_data();
  const int64_t channels = dims[dims.size() - 1];
  std::vector<float> by_node;
  if (packed && !(n_outputs == 1 && channels == 2)) {
    const int64_t n_slots = dims[0];
    by_node.resize(n_nodes * n_slots * c);
    for (int64_t slot = 0; slot < n_slots; ++slot) {
      for (int64_t node = 0; node < n_nodes; ++node) {
        const float* from = source + (slot * n_nodes + node) * channels;
        float* to = by_node.data() + (node * n_slots + slot) * c;
        for (int64_t i = 0; i < c; ++i) to[i] = from[i];
      }
    }
  }
  if (packed && n_outputs == 1 && channels == 2) {
    std::vector<Choice> choices(n_nodes);
    PackedOneOutput(source, feature_ok.typed_data(), slots, n_features, n_nodes, channels,
                    node_rows.typed_data(), static_cast<int>(row_rule), set, choices.data());
    for (int64_t node = 0; node < n_nodes; ++node) {
      feature->typed_data()[node] = choices[node].feature;
      threshold_bin->typed_data()[node] = choices[node].threshold_bin;
      missing_left->typed_data()[node] = choices[node].missing_left;
      gain->typed_data()[node] = choices[node].gain;
      do_split->typed_data()[node] = choices[node].do_split;
    }
    return ffi::Error::Success();
  }
  const auto search =
      n_outputs == 1 ? SearchNode<1> : n_outputs == 2 ? SearchNode<2> : SearchNode<0>;
  for (int64_t node = 0; node < n_nodes; ++node) {
    const float* node_rows_at = node_rows.typed_data();
    const Choice choice =
        packed ? search(by_node.data() + node * dims[0] * c, feature_ok.typed_data(), slots,
                        true, n_features, 1, 0, c, 0, node_rows_at[node],
                        static_cast<int>(row_rule), set, static_cast<int>(n_outputs), gains,
                        offset, scratch, feature_top, category)
               : search(source, feature_ok.typed_data(), slots, false, n_features, n_nodes,
                        n_bins, channels, node, node_rows_at[node], static_cast<int>(row_rule),
                        set, static_cast<int>(n_outputs), gains, offset, scratch, feature_top,
                        category);
    feature->typed_data()[node] = choice.feature;
    threshold_bin->typed_data()[node] = choice.threshold_bin;
    missing_left->typed_data()[node] = choice.missing_left;
    gain->typed_data()[node] = choice.gain;
    do_split->typed_data()[node] = choice.do_split;
    std::copy(choice.category_left, choice.category_left + kBitsetWords,
              bitsets + node * kBitsetWords);
  }
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxboostSplitSearch, SplitSearchImpl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::U8>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Attr<int64_t>("n_outputs")
                                  .Attr<int64_t>("packed")
                                  .Attr<int64_t>("row_rule")
                                  .Ret<ffi::Buffer<ffi::S32>>()
                                  .Ret<ffi::Buffer<ffi::S32>>()
                                  .Ret<ffi::Buffer<ffi::S32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::S32>>()
                                  .Ret<ffi::Buffer<ffi::U32>>());
