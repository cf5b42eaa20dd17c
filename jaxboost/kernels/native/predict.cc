// Forest prediction for jaxboost on CPU, called from XLA through its FFI.
// Built with histogram.cc by jaxboost/native_library.py; the plain reference
// it must equal is jaxboost/predict.py (leaf_of_rows, predict_forest).
//
// Trees are complete and in heap order (node i has children 2i+1, 2i+2; the
// 2^D - 1 internal nodes first): x <= threshold goes left, NaN goes left
// where missing_left.  Rows are walked in blocks, one level of every row of
// the block at a time, so the block's walks are independent and overlap.
//
// Shapes (row-major):
//   X             (n_rows, n_features) float32, NaN for missing
//   feature       (n_trees, 2^D - 1) int32
//   threshold     (n_trees, 2^D - 1) float32
//   missing_left  (n_trees, 2^D - 1) bool
//   leaf_value    (n_trees, 2^D, n_outputs) float32
//   result        (n_rows, n_outputs) float32: the sum over trees

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

constexpr int64_t kBlockRows = 64;

ffi::Error PredictImpl(ffi::Buffer<ffi::F32> X, ffi::Buffer<ffi::S32> feature,
                       ffi::Buffer<ffi::F32> threshold, ffi::Buffer<ffi::PRED> missing_left,
                       ffi::Buffer<ffi::F32> leaf_value, ffi::ResultBuffer<ffi::F32> result) {
  auto x_dims = X.dimensions();
  auto node_dims = feature.dimensions();
  auto leaf_dims = leaf_value.dimensions();
  if (x_dims.size() != 2 || node_dims.size() != 2 || leaf_dims.size() != 3 ||
      threshold.dimensions().size() != 2 || missing_left.dimensions().size() != 2) {
    return ffi::Error::InvalidArgument("jaxboost predict: bad ranks");
  }
  const int64_t n_rows = x_dims[0], n_features = x_dims[1];
  const int64_t n_trees = node_dims[0], n_internal = node_dims[1];
  const int64_t n_leaves = leaf_dims[1], n_outputs = leaf_dims[2];
  if (leaf_dims[0] != n_trees || n_leaves != n_internal + 1 ||
      threshold.dimensions()[1] != n_internal || missing_left.dimensions()[1] != n_internal) {
    return ffi::Error::InvalidArgument("jaxboost predict: tree arrays disagree");
  }
  int depth = 0;
  while ((int64_t{1} << depth) < n_leaves) ++depth;
  const float* x = X.typed_data();
  const int32_t* features = feature.typed_data();
  const float* thresholds = threshold.typed_data();
  const bool* missing = missing_left.typed_data();
  const float* leaves = leaf_value.typed_data();
  for (int64_t i = 0; i < n_trees * n_internal; ++i) {
    if (features[i] < 0 || features[i] >= n_features) {
      return ffi::Error::InvalidArgument("jaxboost predict: split feature out of range");
    }
  }
  float* out = result->typed_data();
  std::vector<double> sums(kBlockRows * n_outputs);
  int32_t node[kBlockRows];
  for (int64_t first = 0; first < n_rows; first += kBlockRows) {
    const int64_t rows = std::min(kBlockRows, n_rows - first);
    std::fill(sums.begin(), sums.end(), 0.0);
    const float* block = x + first * n_features;
    for (int64_t t = 0; t < n_trees; ++t) {
      const int32_t* f = features + t * n_internal;
      const float* thr = thresholds + t * n_internal;
      const bool* miss = missing + t * n_internal;
      std::fill(node, node + rows, 0);
      for (int level = 0; level < depth; ++level) {
        for (int64_t i = 0; i < rows; ++i) {
          const int32_t k = node[i];
          const float v = block[i * n_features + f[k]];
          const bool right = std::isnan(v) ? !miss[k] : v > thr[k];
          node[i] = 2 * k + 1 + static_cast<int32_t>(right);
        }
      }
      const float* tree_leaves = leaves + t * n_leaves * n_outputs;
      for (int64_t i = 0; i < rows; ++i) {
        const float* value = tree_leaves + (node[i] - n_internal) * n_outputs;
        for (int64_t k = 0; k < n_outputs; ++k) sums[i * n_outputs + k] += value[k];
      }
    }
    for (int64_t i = 0; i < rows * n_outputs; ++i) {
      out[first * n_outputs + i] = static_cast<float>(sums[i]);
    }
  }
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxboostPredictForest, PredictImpl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::PRED>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>());
