// Binning for jaxboost on CPU, called from XLA through its FFI.  Built with
// the other kernels by jaxboost/native_library.py; the plain reference it
// must equal is jaxboost/binning.py (apply_bins), its result stored by tiles
// of rows as the other native kernels read it (bin_tiles.h;
// jaxboost.binning.tile_bins).
//
// bin = the number of a feature's upper edges below the value (numpy's
// searchsorted, side "left"); NaN gets bin max_bins.  Found through a lookup
// table where the feature's edges allow one (EdgeLookup), else by a
// branchless binary search over the edges padded with +inf to a power of two.
//
// Shapes (row-major):
//   X       (n_rows, n_features) float32, NaN for missing
//   edges   (n_features, max_bins) float32 ascending upper edges (the last
//           one, +inf, is not searched)
//   result  (n_features, n_rows) uint8, by tiles of rows

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "bin_tiles.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

// A feature's lookup table.  key(x) = min(top, max(0, (x - low) * scale)),
// truncated, is non-decreasing in x (float subtraction and multiplication by
// a scale >= 0 round monotonically), so an edge whose key is below x's is
// below x, and one whose key is above x's is above it.  So with start[k] the
// number of edges whose key is below k, x's bin is start[key(x)] plus the
// edges among the next `compares` (those of x's key at most, then larger
// ones or the +inf padding, all false) that lie below x.  The scale is the
// smallest power-of-two number of buckets over [first edge, last finite
// edge] with at most one edge per bucket, up to kMaxBuckets (then up to
// kMaxCompares edges per bucket), so a bin costs one or a few compares
// instead of log2(max_bins) dependent steps: 2.6x faster on 500k x 28
// values (benchmarks/micro/binning_lookup.cc).  Edges crowded closer than
// that (a feature with extreme outliers among its edges) are searched.
constexpr int32_t kMinBuckets = 256;
constexpr int32_t kMaxBuckets = 4096;
constexpr int kMaxCompares = 4;
constexpr int64_t kBlockRows = 64;  // a block lies within one tile

struct EdgeLookup {
  float low = 0.0f;
  float scale = 0.0f;
  float top = 0.0f;  // the last bucket
  int compares = -1;  // -1: no table, binary search
  std::vector<uint8_t> start;  // (buckets,)
};

inline int32_t Key(float x, float low, float scale, float top) {
  // max(0, NaN) is 0: a NaN product (an infinite x times a zero scale) gets
  // bucket 0, and so does the NaN value itself (its bin is set apart)
  return static_cast<int32_t>(std::min(top, std::max(0.0f, (x - low) * scale)));
}

// The table of a feature's ascending edges `edge` (n_edges, +inf after the
// finite ones), or one with compares -1 when they are too crowded.
EdgeLookup BuildLookup(const float* edge, int64_t n_edges) {
  EdgeLookup lookup;
  int64_t finite = 0;
  while (finite < n_edges && edge[finite] < std::numeric_limits<float>::infinity()) ++finite;
  if (finite == 0) {  // every value is in bin 0
    lookup.compares = 0;
    lookup.start.assign(1, 0);
    return lookup;
  }
  const float span = edge[finite - 1] - edge[0];
  for (int32_t buckets = kMinBuckets; buckets <= kMaxBuckets; buckets *= 2) {
    const float scale = finite == 1 ? 0.0f : static_cast<float>(buckets) / span;
    if (!std::isfinite(scale)) break;  // edges closer than float32 resolves
    const float top = static_cast<float>(buckets - 1);
    std::vector<int32_t> in_bucket(buckets, 0);
    for (int64_t j = 0; j < finite; ++j) ++in_bucket[Key(edge[j], edge[0], scale, top)];
    const int most = *std::max_element(in_bucket.begin(), in_bucket.end());
    if (most <= 1 || (buckets == kMaxBuckets && most <= kMaxCompares)) {
      lookup.low = edge[0];
      lookup.scale = scale;
      lookup.top = top;
      lookup.compares = most;
      lookup.start.resize(buckets);
      int32_t below = 0;
      for (int32_t k = 0; k < buckets; ++k) {
        lookup.start[k] = static_cast<uint8_t>(below);
        below += in_bucket[k];
      }
      return lookup;
    }
  }
  return lookup;
}

// below[r] = the number of edges of `edge` (padded with +inf) below value[r]
template <int kCompares>
void LookUpBlock(const EdgeLookup& lookup, const float* edge, const float* value, int64_t rows,
                 int32_t* below) {
  int32_t key[kBlockRows];  // apart, so that the compiler vectorises the keys
  for (int64_t r = 0; r < rows; ++r) key[r] = Key(value[r], lookup.low, lookup.scale, lookup.top);
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t first = lookup.start[key[r]];
    int32_t count = first;
    for (int i = 0; i < kCompares; ++i) count += edge[first + i] < value[r];
    below[r] = count;
  }
}

// the same by a branchless binary search over `width` edges (a power of two)
void SearchBlock(const float* edge, int64_t width, const float* value, int64_t rows,
                 int32_t* below) {
  for (int64_t r = 0; r < rows; ++r) below[r] = 0;
  for (int64_t step = width / 2; step >= 1; step /= 2) {
    for (int64_t r = 0; r < rows; ++r) {
      below[r] += (edge[below[r] + step - 1] < value[r]) ? step : 0;
    }
  }
}

// below[r] for a block of values of one feature, by its table or a search
void BinBlock(const EdgeLookup& lookup, const float* edge, int64_t width, const float* value,
              int64_t rows, int32_t* below) {
  switch (lookup.compares) {
    case 0: return LookUpBlock<0>(lookup, edge, value, rows, below);
    case 1: return LookUpBlock<1>(lookup, edge, value, rows, below);
    case 2: return LookUpBlock<2>(lookup, edge, value, rows, below);
    case 3: return LookUpBlock<3>(lookup, edge, value, rows, below);
    case 4: return LookUpBlock<4>(lookup, edge, value, rows, below);
    default: return SearchBlock(edge, width, value, rows, below);
  }
}
static_assert(kMaxCompares == 4, "BinBlock handles up to four compares");

ffi::Error BinImpl(ffi::Buffer<ffi::F32> X, ffi::Buffer<ffi::F32> edges,
                   ffi::ResultBuffer<ffi::U8> result) {
  auto x_dims = X.dimensions();
  auto edge_dims = edges.dimensions();
  if (x_dims.size() != 2 || edge_dims.size() != 2 || edge_dims[0] != x_dims[1]) {
    return ffi::Error::InvalidArgument("jaxboost binning: X and edges disagree");
  }
  const int64_t n_rows = x_dims[0], n_features = x_dims[1], max_bins = edge_dims[1];
  if (max_bins < 1 || max_bins > 255) {
    return ffi::Error::InvalidArgument("jaxboost binning: max_bins must be in [1, 255]");
  }
  // the searched edges (max_bins - 1 of them) padded with +inf to `width`,
  // a power of two with at least one +inf (the count never reaches width),
  // and kMaxCompares more (a lookup's compares may run past the last edge)
  int64_t width = 1;
  while (width < max_bins) width *= 2;
  const int64_t pitch = width + kMaxCompares;
  std::vector<float> table(n_features * pitch, std::numeric_limits<float>::infinity());
  const float* edge = edges.typed_data();
  std::vector<EdgeLookup> lookups(n_features);
  for (int64_t f = 0; f < n_features; ++f) {
    for (int64_t b = 0; b + 1 < max_bins; ++b) table[f * pitch + b] = edge[f * max_bins + b];
    lookups[f] = BuildLookup(table.data() + f * pitch, max_bins - 1);
  }
  const float* x = X.typed_data();
  uint8_t* out = result->typed_data();
  // A block of rows one feature at a time: the block's values are
  // independent, so their loads overlap (a binary search's own steps depend
  // on each other: 1.4x faster than one value after another).
  static_assert(kBinTileRows % kBlockRows == 0, "tiles of whole blocks");
  const BinTiles tiles(n_features, n_rows);
  float value[kBlockRows];
  int32_t below[kBlockRows];
  for (int64_t first = 0; first < n_rows; first += kBlockRows) {
    const int64_t rows = std::min(kBlockRows, n_rows - first);
    for (int64_t f = 0; f < n_features; ++f) {
      for (int64_t r = 0; r < rows; ++r) value[r] = x[(first + r) * n_features + f];
      BinBlock(lookups[f], table.data() + f * pitch, width, value, rows, below);
      uint8_t* column = out + tiles.At(f, first);
      for (int64_t r = 0; r < rows; ++r) {
        column[r] = static_cast<uint8_t>(std::isnan(value[r]) ? max_bins : below[r]);
      }
    }
  }
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxboostApplyBins, BinImpl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::U8>>());
