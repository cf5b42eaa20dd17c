// Sums over rows by leaf, in float64 partial sums by lane: row i's values go
// to lane i % kLanes, so that neighbouring rows in the same leaf do not wait
// on each other's additions, and the lanes are added once at the end, in
// order.  Shared by the leaf kernels (leaf_sums.cc) and the routing kernel
// that sums the leaves as it routes (route.cc): the two give equal sums.
#pragma once

#include <cstdint>
#include <vector>

constexpr int64_t kLanes = 4;

// The leaf, or 0 with *out_of_range set where it lies outside [0, n_leaves):
// no branch in the row loops, one error after them.
inline int64_t CheckedLeaf(int32_t leaf, int64_t n_leaves, int32_t* out_of_range) {
  const bool bad = leaf < 0 || leaf >= n_leaves;
  *out_of_range |= static_cast<int32_t>(bad);
  return bad ? 0 : leaf;
}

// Adds every lane's partial sums into out (n_sums = n_leaves * n_values),
// rounding once; partial[lane * n_sums + k].
inline void ReduceLanes(const std::vector<double>& partial, int64_t n_sums, float* out) {
  for (int64_t k = 0; k < n_sums; ++k) {
    double total = 0.0;
    for (int64_t lane = 0; lane < kLanes; ++lane) total += partial[lane * n_sums + k];
    out[k] = static_cast<float>(total);
  }
}
