// Histograms of two leaves' rows for leaf-wise growth on CPU
// (jaxboost.engine.bestfirst), called from XLA through its FFI.  Built with
// the other kernels by jaxboost/native_library.py; the plain reference it
// must equal is jaxboost.kernels.histogram_reference.build_histograms on the
// rows of the two leaves (bestfirst's reference step).
//
// A step of best-first growth splits one leaf into two; only their rows need
// summing.  The kernel lists the rows whose leaf is either (one pass over
// the rows' leaves, no bins read), then sums them feature by feature, in
// float64, rounded once: a step costs the split leaf's rows, not the table's
// (XLA's scatter-add costs every row, kept or not).
//
//   JaxboostLeafHistograms: result[f, c, b, s] = the sum of stats[i, s] over
//     the rows i with leaf_of_row[i] == leaves[c] and bin b' <= b of feature
//     f for the value bins b < n_bins - 1 (running sums, as the split search
//     reads them: find_best_splits(cumulative=True)), bin b' == b for the
//     missing bin, the last.
//
// Shapes (row-major):
//   bins        (n_features, n_rows) uint8 by tiles of rows (bin_tiles.h)
//   leaf_of_row (n_rows,) int32
//   stats       (n_rows, n_stats) float32
//   leaves      (2,) int32: the two leaves
//   result      (n_features, 2, n_bins, n_stats) float32

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <vector>

#include "bin_tiles.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

constexpr int64_t kAnyBin = 256;  // room for every uint8 bin: checked after summing

// One feature's sums of the listed rows: sums[(child * 256 + bin) * S + s]
// += their stats, which lie side by side (gathered once for every feature);
// returns the largest bin read.
template <int64_t S>
int64_t SumFeature(const uint8_t* bins, const int64_t* start, const int64_t* pitch,
                   const uint8_t* child, const float* stats, int64_t n_listed, int64_t f,
                   int64_t n_stats, double* sums) {
  const int64_t width = S > 0 ? S : n_stats;
  int64_t largest = 0;
  for (int64_t j = 0; j < n_listed; ++j) {
    const int64_t b = bins[start[j] + f * pitch[j]];
    largest = std::max(largest, b);
    double* at = sums + (child[j] * kAnyBin + b) * width;
    const float* row = stats + j * width;
    for (int64_t s = 0; s < width; ++s) at[s] += row[s];
  }
  return largest;
}

ffi::Error LeafHistogramsImpl(ffi::Buffer<ffi::U8> bins, ffi::Buffer<ffi::S32> leaf_of_row,
                              ffi::Buffer<ffi::F32> stats, ffi::Buffer<ffi::S32> leaves,
                              int64_t n_bins, ffi::ResultBuffer<ffi::F32> result) {
  auto bin_dims = bins.dimensions();
  auto stat_dims = stats.dimensions();
  if (bin_dims.size() != 2 || stat_dims.size() != 2 || leaves.element_count() != 2) {
    return ffi::Error::InvalidArgument("jaxboost leaf histograms: bad ranks");
  }
  const int64_t n_features = bin_dims[0], n_rows = bin_dims[1], n_stats = stat_dims[1];
  if (stat_dims[0] != n_rows || leaf_of_row.element_count() != n_rows || n_bins < 1 ||
      n_bins > 256) {
    return ffi::Error::InvalidArgument("jaxboost leaf histograms: shapes disagree");
  }
  const uint8_t* bin = bins.typed_data();
  const int32_t* leaf = leaf_of_row.typed_data();
  const float* stat = stats.typed_data();
  const int32_t first = leaves.typed_data()[0], second = leaves.typed_data()[1];
  const BinTiles tiles(n_features, n_rows);
  // the two leaves' rows: where feature 0's bin is, the tile's pitch, the
  // leaf (0 or 1) and the stats, gathered side by side
  std::vector<int64_t> start, pitch;
  std::vector<uint8_t> child;
  std::vector<float> listed;
  start.reserve(n_rows), pitch.reserve(n_rows), child.reserve(n_rows);
  listed.reserve(n_rows * n_stats);
  for (int64_t i = 0; i < n_rows; ++i) {
    const int32_t l = leaf[i];
    if (l != first && l != second) continue;
    start.push_back(tiles.Start(i));
    pitch.push_back(tiles.Pitch(i));
    child.push_back(l == first ? 0 : 1);
    listed.insert(listed.end(), stat + i * n_stats, stat + (i + 1) * n_stats);
  }
  const int64_t n_listed = static_cast<int64_t>(child.size());
  std::vector<double> sums(2 * kAnyBin * n_stats);
  float* out = result->typed_data();
  for (int64_t f = 0; f < n_features; ++f) {
    std::fill(sums.begin(), sums.begin() + (kAnyBin + n_bins) * n_stats, 0.0);
    const auto args = std::make_tuple(bin, start.data(), pitch.data(), child.data(),
                                      listed.data(), n_listed, f, n_stats, sums.data());
    int64_t largest;
    if (n_stats == 2) {
      largest = std::apply(SumFeature<2>, args);
    } else if (n_stats == 3) {
      largest = std::apply(SumFeature<3>, args);
    } else {
      largest = std::apply(SumFeature<0>, args);
    }
    if (largest >= n_bins) {
      return ffi::Error::InvalidArgument("jaxboost leaf histograms: a bin out of range");
    }
    for (int64_t c = 0; c < 2; ++c) {  // running sums over the value bins, rounded once
      const double* at = sums.data() + c * kAnyBin * n_stats;
      float* to = out + (f * 2 + c) * n_bins * n_stats;
      for (int64_t s = 0; s < n_stats; ++s) {
        double running = 0.0;
        for (int64_t b = 0; b + 1 < n_bins; ++b) {
          running += at[b * n_stats + s];
          to[b * n_stats + s] = static_cast<float>(running);
        }
        to[(n_bins - 1) * n_stats + s] = static_cast<float>(at[(n_bins - 1) * n_stats + s]);
      }
    }
  }
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxboostLeafHistograms, LeafHistogramsImpl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::U8>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Attr<int64_t>("n_bins")
                                  .Ret<ffi::Buffer<ffi::F32>>());
