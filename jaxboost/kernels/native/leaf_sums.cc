// The line search's leaf kernels for jaxboost on CPU, called from XLA through
// its FFI.  Built with the other kernels by jaxboost/native_library.py; the
// plain references they must equal are in jaxboost/leaf_sums.py (XLA's
// gather and jax.ops.segment_sum).
//
// Every iteration of the line search spreads each leaf's trial steps to its
// rows, evaluates the loss's slope and curvature there and sums them by leaf.
// XLA fuses the gather and the scatter-add into the loss's derivatives and
// then computes them one element at a time; custom calls cannot be fused
// into, so the derivatives become a vectorised loop of their own.
//
//   JaxboostLeafSums: result[l, v] = sum of values[v, i] over the rows i
//     with leaf[i] == l, in float64, rounded once.
//   JaxboostSlopeSums: result[l, (k, p)] = the sums over the rows i of leaf
//     l of slope[p, i] * w[i] (k = 0), curvature[p, i] * w[i] (k = 1) and
//     |slope[p, i]| * w[i] (k = 2), in float64 with float32 products (what
//     JaxboostLeafSums gives on the concatenated, weighted values).  The line
//     search's three sums at P points: slope and curvature arrive as two
//     buffers, so XLA computes the loss's derivatives once per row; fused into
//     one (3P, n_rows) concatenation it recomputes their shared exponentials
//     for each of the 3P rows (log-cosh at 2 points on 500k rows, 32 leaves:
//     7.2 against 4.0 ms).
//   JaxboostRowsOfLeaves: result[v, i] = table[leaf[i], v].
//   JaxboostFirstTrueRows: the first capacity rows i where mask[i] (in
//     order, then 0 where fewer are), and how many rows are (the line
//     search's narrowing; jnp.nonzero(mask, size=capacity) and a sum).
//
// Shapes (row-major):
//   values  (n_values, n_rows) float32: one quantity per row of the array
//   slope, curvature  (n_points, n_rows) float32; w (n_rows,) float32 >= 0
//   table   (n_leaves, n_values) float32
//   leaf    (n_rows,) int32 in [0, n_leaves); another value is an error
//   result  (n_leaves, n_values) float32 (sums) or (n_values, n_rows)
//           float32 (rows of leaves)

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "leaf_lanes.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

// Row i's values go to the partial sums of lane i % kLanes, so that
// neighbouring rows in the same leaf do not wait on each other's additions;
// kValues > 0 fixes the number of values at compile time (the inner loop
// unrolls), 0 takes it from the arguments.
// partial[(lane * n_leaves + leaf) * n_values + value]
template <int64_t kValues>
bool SumRows(const float* data, const int32_t* leaf_of_row, int64_t n_rows, int64_t n_leaves,
             int64_t n_values, double* partial) {
  const int64_t values_per_row = kValues > 0 ? kValues : n_values;
  int32_t out_of_range = 0;
  for (int64_t i = 0; i < n_rows; ++i) {
    const int64_t l = CheckedLeaf(leaf_of_row[i], n_leaves, &out_of_range);
    double* sums = partial + ((i % kLanes) * n_leaves + l) * values_per_row;
    for (int64_t v = 0; v < values_per_row; ++v) sums[v] += data[v * n_rows + i];
  }
  return out_of_range == 0;
}

ffi::Error LeafSumsImpl(ffi::Buffer<ffi::F32> values, ffi::Buffer<ffi::S32> leaf,
                        int64_t n_leaves, ffi::ResultBuffer<ffi::F32> result) {
  auto dims = values.dimensions();
  if (dims.size() != 2 || leaf.dimensions().size() != 1 || leaf.dimensions()[0] != dims[1]) {
    return ffi::Error::InvalidArgument("jaxboost leaf sums: values and leaf disagree");
  }
  const int64_t n_values = dims[0], n_rows = dims[1];
  const int32_t* leaf_of_row = leaf.typed_data();
  const float* data = values.typed_data();
  std::vector<double> partial(kLanes * n_leaves * n_values, 0.0);
  bool in_range;
  switch (n_values) {  // the line search's sizes: 1 (Armijo), 3 per point
    case 1: in_range = SumRows<1>(data, leaf_of_row, n_rows, n_leaves, 1, partial.data()); break;
    case 3: in_range = SumRows<3>(data, leaf_of_row, n_rows, n_leaves, 3, partial.data()); break;
    case 6: in_range = SumRows<6>(data, leaf_of_row, n_rows, n_leaves, 6, partial.data()); break;
    default:
      in_range = SumRows<0>(data, leaf_of_row, n_rows, n_leaves, n_values, partial.data());
  }
  if (!in_range) {
    return ffi::Error::InvalidArgument("jaxboost leaf sums: leaf index out of range");
  }
  ReduceLanes(partial, n_leaves * n_values, result->typed_data());
  return ffi::Error::Success();
}

// The three weighted sums of JaxboostSlopeSums, lanes as in SumRows;
// kPoints > 0 fixes the number of points at compile time.
// partial[(lane * n_leaves + leaf) * 3 * n_points + k * n_points + point]
template <int64_t kPoints>
bool SumSlopes(const float* slope, const float* curvature, const float* weight,
               const int32_t* leaf_of_row, int64_t n_rows, int64_t n_leaves, int64_t n_points,
               double* partial) {
  const int64_t points = kPoints > 0 ? kPoints : n_points;
  int32_t out_of_range = 0;
  for (int64_t i = 0; i < n_rows; ++i) {
    const int64_t l = CheckedLeaf(leaf_of_row[i], n_leaves, &out_of_range);
    double* sums = partial + ((i % kLanes) * n_leaves + l) * 3 * points;
    const float w = weight[i];
    for (int64_t p = 0; p < points; ++p) {
      const float s = slope[p * n_rows + i];
      sums[p] += s * w;
      sums[points + p] += curvature[p * n_rows + i] * w;
      sums[2 * points + p] += std::fabs(s) * w;
    }
  }
  return out_of_range == 0;
}

ffi::Error SlopeSumsImpl(ffi::Buffer<ffi::F32> slope, ffi::Buffer<ffi::F32> curvature,
                         ffi::Buffer<ffi::F32> weight, ffi::Buffer<ffi::S32> leaf,
                         int64_t n_leaves, ffi::ResultBuffer<ffi::F32> result) {
  auto dims = slope.dimensions();
  if (dims.size() != 2 || curvature.dimensions().size() != 2 ||
      curvature.dimensions()[0] != dims[0] || curvature.dimensions()[1] != dims[1] ||
      weight.dimensions().size() != 1 || weight.dimensions()[0] != dims[1] ||
      leaf.dimensions().size() != 1 || leaf.dimensions()[0] != dims[1]) {
    return ffi::Error::InvalidArgument("jaxboost slope sums: shapes disagree");
  }
  const int64_t n_points = dims[0], n_rows = dims[1];
  std::vector<double> partial(kLanes * n_leaves * 3 * n_points, 0.0);
  const float *s = slope.typed_data(), *c = curvature.typed_data(), *w = weight.typed_data();
  const int32_t* l = leaf.typed_data();
  bool in_range;
  switch (n_points) {  // the line search's sizes: 1 (its start), 2 points
    case 1: in_range = SumSlopes<1>(s, c, w, l, n_rows, n_leaves, 1, partial.data()); break;
    case 2: in_range = SumSlopes<2>(s, c, w, l, n_rows, n_leaves, 2, partial.data()); break;
    default: in_range = SumSlopes<0>(s, c, w, l, n_rows, n_leaves, n_points, partial.data());
  }
  if (!in_range) {
    return ffi::Error::InvalidArgument("jaxboost slope sums: leaf index out of range");
  }
  ReduceLanes(partial, n_leaves * 3 * n_points, result->typed_data());
  return ffi::Error::Success();
}

// out[v][i] = by_leaf[leaf_of_row[i]][v]; kValues as in SumRows.
template <int64_t kValues>
bool SpreadRows(const float* by_leaf, const int32_t* leaf_of_row, int64_t n_rows,
                int64_t n_leaves, int64_t n_values, float* out) {
  const int64_t values_per_row = kValues > 0 ? kValues : n_values;
  int32_t out_of_range = 0;
  for (int64_t i = 0; i < n_rows; ++i) {
    const float* row = by_leaf + CheckedLeaf(leaf_of_row[i], n_leaves, &out_of_range) * values_per_row;
    for (int64_t v = 0; v < values_per_row; ++v) out[v * n_rows + i] = row[v];
  }
  return out_of_range == 0;
}

ffi::Error RowsOfLeavesImpl(ffi::Buffer<ffi::F32> table, ffi::Buffer<ffi::S32> leaf,
                            ffi::ResultBuffer<ffi::F32> result) {
  auto dims = table.dimensions();
  if (dims.size() != 2 || leaf.dimensions().size() != 1) {
    return ffi::Error::InvalidArgument("jaxboost rows of leaves: bad ranks");
  }
  const int64_t n_leaves = dims[0], n_values = dims[1], n_rows = leaf.dimensions()[0];
  const int32_t* leaf_of_row = leaf.typed_data();
  const float* by_leaf = table.typed_data();
  float* out = result->typed_data();
  bool in_range;
  switch (n_values) {  // the line search's sizes: 1 (a direction, Armijo), 2 points
    case 1: in_range = SpreadRows<1>(by_leaf, leaf_of_row, n_rows, n_leaves, 1, out); break;
    case 2: in_range = SpreadRows<2>(by_leaf, leaf_of_row, n_rows, n_leaves, 2, out); break;
    default: in_range = SpreadRows<0>(by_leaf, leaf_of_row, n_rows, n_leaves, n_values, out);
  }
  if (!in_range) {
    return ffi::Error::InvalidArgument("jaxboost rows of leaves: leaf index out of range");
  }
  return ffi::Error::Success();
}

ffi::Error FirstTrueRowsImpl(ffi::Buffer<ffi::PRED> mask, ffi::ResultBuffer<ffi::S32> rows,
                             ffi::ResultBuffer<ffi::S32> count) {
  if (mask.dimensions().size() != 1 || rows->dimensions().size() != 1) {
    return ffi::Error::InvalidArgument("jaxboost first true rows: bad ranks");
  }
  const int64_t n_rows = mask.dimensions()[0], capacity = rows->dimensions()[0];
  const bool* is_true = mask.typed_data();
  int32_t* out = rows->typed_data();
  int64_t found = 0;
  for (int64_t i = 0; i < n_rows; ++i) {
    if (is_true[i]) {
      if (found < capacity) out[found] = static_cast<int32_t>(i);
      ++found;
    }
  }
  std::fill(out + std::min(found, capacity), out + capacity, 0);
  count->typed_data()[0] = static_cast<int32_t>(found);
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxboostLeafSums, LeafSumsImpl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Attr<int64_t>("n_leaves")
                                  .Ret<ffi::Buffer<ffi::F32>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxboostSlopeSums, SlopeSumsImpl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Attr<int64_t>("n_leaves")
                                  .Ret<ffi::Buffer<ffi::F32>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxboostRowsOfLeaves, RowsOfLeavesImpl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxboostFirstTrueRows, FirstTrueRowsImpl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::PRED>>()
                                  .Ret<ffi::Buffer<ffi::S32>>()
                                  .Ret<ffi::Buffer<ffi::S32>>());
