// Routing rows one level down a tree for jaxboost on CPU, called from XLA
// through its FFI.  Built with the other kernels by
// jaxboost/native_library.py; the plain reference it must equal is
// jaxboost.tree.route_rows.
//
// XLA fuses the split search's last steps (a few operations on arrays of one
// value per node) into its per-row routing loop and then recomputes them for
// every row: the deepest level's routing took 5.3 ms per 500k rows in a fit,
// against about 0.7 ms alone.  A custom call cannot be fused into, so the
// per-node arrays are computed once and the rows are routed here.
//
//   JaxboostRouteRows: next[r] = 2 * node[r] + goes_right (route_rows.h, whose
//     loop the children histogram kernels share).
//   JaxboostRouteLeafSums: the same, the last level of a tree, and in the
//     same pass sums[l, v] = the sum of value v over the rows routed to leaf
//     l, in float64 rounded once: what JaxboostLeafSums (leaf_sums.cc) gives
//     on the values stacked as rows, in the same order.  A fit's leaf totals
//     (gradient, hessian and weight sums) then cost no pass of their own.
//
// Shapes (row-major):
//   bins           (n_features, n_rows) uint8, by tiles of rows (bin_tiles.h)
//   node_of_row    (n_rows,) int32 in [0, n_nodes); another value is an error
//   feature        (n_nodes,) int32 in [0, n_features); likewise
//   threshold_bin  (n_nodes,) int32
//   missing_left   (n_nodes,) bool
//   category_left  (n_nodes, 8) uint32 the bins each node sends left (all
//                  zero at numeric nodes), or (0,) without categorical features
//   result         (n_rows,) int32 node within the next level
//   values         any number of (n_values_j, n_rows) float32 buffers
//   sums           (2 n_nodes, sum of n_values_j) float32

#include <cstdint>
#include <string>
#include <vector>

#include "bin_tiles.h"
#include "leaf_lanes.h"
#include "route_rows.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

// The level's splits, after checking the buffers' shapes against the bins
// (errors name `kernel`).
ffi::Error ReadLevel(const std::string& kernel, const ffi::Buffer<ffi::U8>& bins,
                     const ffi::Buffer<ffi::S32>& node_of_row, const ffi::Buffer<ffi::S32>& feature,
                     const ffi::Buffer<ffi::S32>& threshold_bin,
                     const ffi::Buffer<ffi::PRED>& missing_left,
                     const ffi::Buffer<ffi::U32>& category_left, int64_t missing_bin,
                     LevelSplits* splits) {
  auto dims = bins.dimensions();
  const int64_t n_nodes = feature.element_count();
  if (dims.size() != 2 || node_of_row.element_count() != dims[1] ||
      threshold_bin.element_count() != n_nodes || missing_left.element_count() != n_nodes) {
    return ffi::Error::InvalidArgument(kernel + ": shapes differ");
  }
  if (!splits->Read(feature.typed_data(), threshold_bin.typed_data(), missing_left.typed_data(),
                    n_nodes, dims[0])) {
    return ffi::Error::InvalidArgument(kernel + ": feature out of range");
  }
  if (!splits->ReadSets(category_left.typed_data(), category_left.element_count(), missing_bin)) {
    return ffi::Error::InvalidArgument(kernel + ": category_left not (n_nodes, 8)");
  }
  return ffi::Error::Success();
}

ffi::Error RouteImpl(ffi::Buffer<ffi::U8> bins, ffi::Buffer<ffi::S32> node_of_row,
                     ffi::Buffer<ffi::S32> feature, ffi::Buffer<ffi::S32> threshold_bin,
                     ffi::Buffer<ffi::PRED> missing_left, ffi::Buffer<ffi::U32> category_left,
                     ffi::ResultBuffer<ffi::S32> next, int64_t missing_bin) {
  LevelSplits splits;
  ffi::Error read = ReadLevel("jaxboost route", bins, node_of_row, feature, threshold_bin,
                              missing_left, category_left, missing_bin, &splits);
  if (read.failure()) return read;
  const int64_t n_features = bins.dimensions()[0], n_rows = bins.dimensions()[1];
  if (!RouteRows<false>(bins.typed_data(), BinTiles(n_features, n_rows), node_of_row.typed_data(),
                        splits, missing_bin, next->typed_data(), nullptr)) {
    return ffi::Error::InvalidArgument("jaxboost route: node_of_row out of range");
  }
  return ffi::Error::Success();
}

// Row r's values (value v at value_rows[v][r]) added to the partial sums of
// its leaf in lane r % kLanes; kValues > 0 fixes the number of values at
// compile time, 0 takes it from value_rows.
// partial[(lane * n_leaves + leaf) * n_values + value]
template <int64_t kValues>
bool RouteAndSum(const uint8_t* bins, const BinTiles& tiles, const int32_t* node,
                 const LevelSplits& splits, int64_t missing_bin, int32_t* next,
                 const std::vector<const float*>& value_rows, double* partial) {
  const int64_t n_values = kValues > 0 ? kValues : static_cast<int64_t>(value_rows.size());
  const int64_t n_leaves = 2 * splits.n_nodes();
  const float* const* rows = value_rows.data();
  return RouteTiles(bins, tiles, node, splits, missing_bin, next, [&](int64_t t0, int64_t t1) {
    for (int64_t r = t0; r < t1; ++r) {
      double* sums = partial + ((r % kLanes) * n_leaves + next[r]) * n_values;
      for (int64_t v = 0; v < n_values; ++v) sums[v] += rows[v][r];
    }
  });
}

ffi::Error RouteLeafSumsImpl(ffi::Buffer<ffi::U8> bins, ffi::Buffer<ffi::S32> node_of_row,
                             ffi::Buffer<ffi::S32> feature, ffi::Buffer<ffi::S32> threshold_bin,
                             ffi::Buffer<ffi::PRED> missing_left,
                             ffi::Buffer<ffi::U32> category_left, ffi::RemainingArgs values,
                             ffi::ResultBuffer<ffi::S32> next, ffi::ResultBuffer<ffi::F32> sums,
                             int64_t missing_bin) {
  LevelSplits splits;
  ffi::Error read = ReadLevel("jaxboost route leaf sums", bins, node_of_row, feature,
                              threshold_bin, missing_left, category_left, missing_bin, &splits);
  if (read.failure()) return read;
  const int64_t n_features = bins.dimensions()[0], n_rows = bins.dimensions()[1];
  const int64_t n_leaves = 2 * splits.n_nodes();
  std::vector<const float*> value_rows;
  for (size_t j = 0; j < values.size(); ++j) {
    auto buffer = values.get<ffi::Buffer<ffi::F32>>(j);
    if (buffer.has_error()) return buffer.error();
    auto value_dims = buffer->dimensions();
    if (value_dims.size() != 2 || value_dims[1] != n_rows) {
      return ffi::Error::InvalidArgument("jaxboost route leaf sums: values not (n, n_rows)");
    }
    for (int64_t v = 0; v < value_dims[0]; ++v) {
      value_rows.push_back(buffer->typed_data() + v * n_rows);
    }
  }
  const int64_t n_values = static_cast<int64_t>(value_rows.size());
  if (sums->element_count() != n_leaves * n_values) {
    return ffi::Error::InvalidArgument("jaxboost route leaf sums: sums not (2 n_nodes, n_values)");
  }
  std::vector<double> partial(kLanes * n_leaves * n_values, 0.0);
  const BinTiles tiles(n_features, n_rows);
  const uint8_t* b = bins.typed_data();
  const int32_t* node = node_of_row.typed_data();
  int32_t* out = next->typed_data();
  double* sum = partial.data();
  bool in_range;
  switch (n_values) {  // a fit's: [grad, hess, weight] per output, and the extras
    case 3:
      in_range = RouteAndSum<3>(b, tiles, node, splits, missing_bin, out, value_rows, sum);
      break;
    case 4:
      in_range = RouteAndSum<4>(b, tiles, node, splits, missing_bin, out, value_rows, sum);
      break;
    default:
      in_range = RouteAndSum<0>(b, tiles, node, splits, missing_bin, out, value_rows, sum);
  }
  if (!in_range) {
    return ffi::Error::InvalidArgument("jaxboost route leaf sums: node_of_row out of range");
  }
  ReduceLanes(partial, n_leaves * n_values, sums->typed_data());
  return ffi::Error::Success();
}

// Both kernels' first arguments: the bins, node_of_row and the level's
// splits (feature, threshold bin, missing left, category sets).
auto BindLevel() {
  return ffi::Ffi::Bind()
      .Arg<ffi::Buffer<ffi::U8>>()
      .Arg<ffi::Buffer<ffi::S32>>()
      .Arg<ffi::Buffer<ffi::S32>>()
      .Arg<ffi::Buffer<ffi::S32>>()
      .Arg<ffi::Buffer<ffi::PRED>>()
      .Arg<ffi::Buffer<ffi::U32>>();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxboostRouteRows, RouteImpl,
                              BindLevel()
                                  .Ret<ffi::Buffer<ffi::S32>>()
                                  .Attr<int64_t>("missing_bin"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxboostRouteLeafSums, RouteLeafSumsImpl,
                              BindLevel()
                                  .RemainingArgs()
                                  .Ret<ffi::Buffer<ffi::S32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Attr<int64_t>("missing_bin"));
