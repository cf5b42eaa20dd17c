// The candidates of a categorical feature at one node, for the native split
// search (split_search.cc) and the category sort (category_order.cc).  The
// search it must equal is jaxboost.engine.categorical.candidate_sums with
// native_order (the categories sorted by category_order.cc's JaxboostCategorySums):
//
//   plain[b] = running[b] - running[b - 1] (jnp.diff of the running sums);
//   a bin is present where its hessians sum above 0; its key G / (H +
//   cat_smooth) of the first output, +inf where empty; the bins sorted by
//   key (ties in bin order, NaN last, -0.0 as 0.0); candidate t's left sums
//   the first t + 1 bins' sums added in that order (a set feature) or bin
//   order[t]'s own (one category against the rest); candidate t is valid
//   where t + 1 <= present (one against the rest), else where t + 1 <
//   present and either side holds at most max_cat_threshold categories.

#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace jaxboost_category {

// Bits of a float32 whose unsigned order is the floats' order as lax.sort
// takes it: -0.0 as 0.0, every NaN above +inf.
inline uint32_t OrderBits(float value) {
  if (std::isnan(value)) return 0xffffffffu;
  if (value == 0.0f) value = 0.0f;
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

// sorted[j] = the index of the j-th smallest of row[0..n), ties in index
// order: one sort of (order bits, index) words, unique, so no stable sort.
inline void SortList(const float* row, int64_t n, std::vector<uint64_t>& word, int32_t* sorted) {
  word.resize(n);
  for (int64_t j = 0; j < n; ++j) word[j] = (uint64_t{OrderBits(row[j])} << 32) | j;
  std::sort(word.begin(), word.end());
  for (int64_t j = 0; j < n; ++j) sorted[j] = static_cast<int32_t>(word[j] & 0xffffffffu);
}

// SortList of keys whose empty bins' are +inf, ``present`` of them
// finite or not: the present bins' sorted alone, then the empty ones in
// bin order (a node holds few of a feature's categories, deep in a tree),
// unless a present bin's key is +inf or NaN (then every bin's sorted).
inline void SortPresent(const float* key, int64_t n, int64_t present,
                        std::vector<uint64_t>& word, int32_t* sorted) {
  const uint32_t last = OrderBits(std::numeric_limits<float>::infinity());
  word.resize(n);
  int64_t n_words = 0;
  for (int64_t j = 0; j < n && n_words < present; ++j) {
    const uint32_t bits = OrderBits(key[j]);
    if (bits >= last) continue;  // (an empty bin, or a present one past every finite key)
    word[n_words++] = (uint64_t{bits} << 32) | j;
  }
  if (n_words < present) {  // a present bin's key is +inf or NaN
    SortList(key, n, word, sorted);
    return;
  }
  std::sort(word.begin(), word.begin() + n_words);
  int64_t next = 0;
  for (int64_t j = 0; j < n_words; ++j) sorted[next++] = static_cast<int32_t>(word[j] & 0xffffffffu);
  for (int64_t j = 0; j < n; ++j) {
    if (OrderBits(key[j]) >= last) sorted[next++] = static_cast<int32_t>(j);
  }
}

// Scratch of CategoryCandidates, kept between calls.
struct Scratch {
  std::vector<float> plain, key;
  std::vector<uint64_t> word;
};

// One feature of one node: running (n_value_bins rows, pitch floats apart)
// holds its value bins' running sums, [grad (K), hess (K)] first; writes
// left (n_value_bins x 2K, the candidates' left sums), valid
// (n_value_bins) and order (n_value_bins, the bins in sorted order).
inline void CategoryCandidates(const float* running, int64_t pitch, int64_t n_value_bins,
                               int n_outputs, bool one_hot, float cat_smooth,
                               int64_t max_cat_threshold, Scratch& scratch, float* left,
                               uint8_t* valid, int32_t* order) {
  const int c = 2 * n_outputs;
  scratch.plain.resize(n_value_bins * c);
  scratch.key.resize(n_value_bins);
  float* plain = scratch.plain.data();
  int64_t present = 0;
  for (int64_t b = 0; b < n_value_bins; ++b) {
    const float* at = running + b * pitch;
    float* to = plain + b * c;
    for (int i = 0; i < c; ++i) to[i] = b == 0 ? at[i] : at[i] - at[i - pitch];
    float hess = to[n_outputs];
    for (int k = 1; k < n_outputs; ++k) hess = hess + to[n_outputs + k];
    const bool non_empty = hess > 0.0f;
    present += non_empty;
    scratch.key[b] = non_empty ? to[0] / (to[n_outputs] + cat_smooth)
                               : std::numeric_limits<float>::infinity();
  }
  SortPresent(scratch.key.data(), n_value_bins, present, scratch.word, order);
  for (int64_t j = 0; j < n_value_bins; ++j) {
    const float* bin = plain + order[j] * c;
    float* to = left + j * c;
    const float* before = j == 0 ? left : to - c;  // (0s before the first)
    for (int i = 0; i < c; ++i) to[i] = one_hot ? bin[i] : (j == 0 ? 0.0f : before[i]) + bin[i];
    const int64_t size = j + 1;
    valid[j] = one_hot ? size <= present
                       : size < present &&
                             (size <= max_cat_threshold || present - size <= max_cat_threshold);
  }
}

// feature_ok's values in the split search: a feature the tree may not use, a
// numeric one, a categorical one of category sets, of one category against
// the rest
constexpr uint8_t kUnused = 0, kNumeric = 1, kCategorySets = 2, kOneHot = 3;
constexpr int64_t kBitsetWords = 8;  // 256 bins

// The split search's buffers of a node's categorical features: a feature's
// candidates' left sums and which are allowed, and every categorical
// feature's order of the bins.
struct CategoryBuffers {
  std::vector<float> left;
  std::vector<uint8_t> valid;
  std::vector<int32_t> order;
  Scratch scratch;

  // A categorical feature's gains (the split search's layout: missing
  // right for every candidate, then left) with the candidates its rules do
  // not allow at -inf; returns the largest, NaN if one is (NaN wins, as
  // XLA's max).
  float Mask(int64_t n_thresholds, float* gains) const {
    float top = -std::numeric_limits<float>::infinity();
    bool bad = false;
    for (int64_t t = 0; t < n_thresholds; ++t) {
      for (int d = 0; d < 2; ++d) {
        float& gain = gains[d * n_thresholds + t];
        if (!valid[t]) gain = -std::numeric_limits<float>::infinity();
        bad |= std::isnan(gain);
        top = gain > top ? gain : top;
      }
    }
    return bad ? std::numeric_limits<float>::quiet_NaN() : top;
  }

  // The bins feature's candidate sends left, as bits (bit b % 32 of word
  // b / 32) or'ed into bitset.
  void Chosen(int64_t feature, int64_t n_value_bins, bool one_hot, int64_t candidate,
              uint32_t* bitset) const {
    const int32_t* sorted = order.data() + feature * n_value_bins;
    for (int64_t j = one_hot ? candidate : 0; j <= candidate; ++j) {
      bitset[sorted[j] >> 5] |= uint32_t{1} << (sorted[j] & 31);
    }
  }
};

}  // namespace jaxboost_category
