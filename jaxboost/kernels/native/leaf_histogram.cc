// Leaf-wise growth's step on CPU (jaxboost.engine.bestfirst), called from XLA
// through its FFI: split one leaf's rows and sum the two children's
// histograms, in time linear in that leaf's rows.  Built with the other
// kernels by jaxboost/native_library.py; the plain reference it must equal
// is bestfirst's reference step (every row's leaf number, routed by
// jaxboost.engine.leaf_rows.goes_right, summed by
// jaxboost.kernels.histogram_reference.build_histograms).
//
// The rows are kept as LightGBM keeps them: `order` is a permutation of the
// shard's rows in which every leaf's rows lie side by side, in increasing
// row order, the segment [start, start + count) of the leaf.  A split
// partitions its leaf's segment in place, stably: the rows going left first
// (the left child keeps the segment's start), then the rows going right.
// The smaller child's rows are then summed, several features a pass, in
// float64, in increasing row order, rounded once, and the other child is
// its parent's histogram (kept in a table of every leaf's) minus this one
// (LightGBM's subtraction): a step costs the split leaf's rows once and the
// smaller child's rows times the features.  The permutation and the table
// are updated in place (aliased): XLA copies neither.
//
//   JaxboostLeafSplit: with the segment [start, start + count) of `order`
//     and the rule (feature f, threshold bin t, missing_left m, categories
//     `category_left`: a categorical rule where any word is nonzero) a row of
//     bin b goes right when b is the missing bin (n_bins - 1) and not m, or
//     else when it is not in the set (categorical) or b > t.
//     order:  the segment partitioned, the rest as it was (the input's
//             buffer, aliased);
//     result[f, c, b, s] = child c's (0: left, 1: right) sum of stats[i, s]
//             over its rows i with bin b' <= b of feature f for the value
//             bins b < n_bins - 1 (running sums, as the split search reads
//             them: find_best_splits(cumulative=True)), bin b' == b for the
//             missing bin, the last.  The child summed from its rows is the
//             one of fewer rows (the left on a tie) where `smaller`, the
//             other is leaf_hist[leaves[0]] minus it; else the left is
//             summed and the right is zero;
//     leaf_hist: every leaf's histograms (the input's buffer, aliased), with
//             leaf_hist[leaves[c]] = result[:, c] (leaves past the table: not
//             kept);
//     rows:   (left rows, right rows, left rows with row_positive,
//             right rows with row_positive): the last two equal the first
//             two when row_positive is empty.
//   A rule sending every row left (t = n_bins - 1, m) and not `smaller`
//   makes the root's histogram from the segment of every row.
//
// Shapes (row-major):
//   tiled         (n_features, n_rows) uint8 by tiles of rows (bin_tiles.h)
//   bins          (n_rows, n_features) uint8, the same row by row
//   stats         (n_rows, n_stats) float32
//   order         (n_rows,) int32
//   leaf_hist     (n_leaves, n_features, n_bins, n_stats) float32
//   row_positive  (n_rows,) uint8, or (0,): not counted
//   leaves        (2,) int32: the split leaf (its left child), its right child
//   segment       (2,) int32: start, count
//   rule          (3,) int32: feature, threshold bin, missing_left
//   category_left (8,) uint32
//   result        (n_features, 2, n_bins, n_stats) float32
//   rows          (4,) int32

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <vector>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "bin_tiles.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

constexpr int64_t kAnyBin = 256;  // room for every uint8 bin: checked after summing
// features summed in one pass over the rows: their sums (kAnyBin bins of 2
// float64 a feature: 128 KiB) stay in the core's L2 cache
constexpr int64_t kBlock = 32;
constexpr int64_t kAhead = 16;  // rows ahead whose bins and stats are prefetched

// The sums of features [f0, f0 + n_block) over the listed rows, whose bins
// lie row by row (`row_bins`, n_features a row): sums[(k * kAnyBin + bin) *
// S + s] += stats[row, s], row after row in the order listed; returns the
// largest bin read.  A row's bins are one or two cache lines, read once
// for all the block's features (by tiles, they were one line a feature).
template <int64_t S>
int64_t SumFeatures(const uint8_t* row_bins, int64_t n_features, const float* stats,
                    const int32_t* rows, int64_t n_listed, int64_t f0, int64_t n_block,
                    int64_t n_stats, double* sums) {
  const int64_t width = S > 0 ? S : n_stats;
  uint8_t largest = 0;
  for (int64_t j = 0; j < n_listed; ++j) {
    if (j + kAhead < n_listed) {
      const int64_t ahead = rows[j + kAhead];
      __builtin_prefetch(row_bins + ahead * n_features + f0);
      __builtin_prefetch(stats + ahead * width);
    }
    const int64_t r = rows[j];
    const uint8_t* bin = row_bins + r * n_features + f0;
    const float* row = stats + r * width;
    float stat[S > 0 ? S : 1];
    if constexpr (S > 0) {
      for (int64_t s = 0; s < S; ++s) stat[s] = row[s];
    }
#ifdef __SSE2__
    if constexpr (S == 2) {  // a gradient and a hessian: one 16-byte add
      const __m128d pair = _mm_cvtps_pd(_mm_castpd_ps(_mm_load_sd(
          reinterpret_cast<const double*>(row))));
      for (int64_t k = 0; k < n_block; ++k) {
        const uint8_t b = bin[k];
        largest = std::max(largest, b);
        double* to = sums + (k * kAnyBin + b) * 2;
        _mm_storeu_pd(to, _mm_add_pd(_mm_loadu_pd(to), pair));
      }
      continue;
    }
#endif
    for (int64_t k = 0; k < n_block; ++k) {
      const uint8_t b = bin[k];
      largest = std::max(largest, b);
      double* to = sums + (k * kAnyBin + b) * width;
      if constexpr (S > 0) {
        for (int64_t s = 0; s < S; ++s) to[s] += stat[s];
      } else {
        for (int64_t s = 0; s < width; ++s) to[s] += row[s];
      }
    }
  }
  return largest;
}

int64_t SumRows(const uint8_t* row_bins, int64_t n_features, const float* stats,
                const int32_t* rows, int64_t n_listed, int64_t f0, int64_t n_block,
                int64_t n_stats, double* sums) {
  const auto args =
      std::make_tuple(row_bins, n_features, stats, rows, n_listed, f0, n_block, n_stats, sums);
  if (n_stats == 2) return std::apply(SumFeatures<2>, args);
  if (n_stats == 3) return std::apply(SumFeatures<3>, args);
  if (n_stats == 4) return std::apply(SumFeatures<4>, args);
  return std::apply(SumFeatures<0>, args);
}

// The rule of one split: does a row of bin b go right?
struct Rule {
  int64_t threshold_bin, missing_bin;
  bool missing_left, categorical;
  const uint32_t* category_left;

  bool GoesRight(int64_t b) const {  // (no branch on the bin: rows go either way)
    const bool value_right =
        categorical ? ((category_left[b >> 5] >> (b & 31)) & 1) == 0 : b > threshold_bin;
    return b == missing_bin ? !missing_left : value_right;
  }
};

// Scratch reused from call to call (a step's rows: no allocation per step
// once the root's are made).
struct Scratch {
  std::vector<int32_t> right;
  std::vector<double> sums;
};

// The running sums over the value bins of `sums` (kAnyBin bins of n_stats),
// the missing bin (the last) as it is, rounded once into `to`.
void WriteRunning(const double* sums, int64_t n_bins, int64_t n_stats, float* to) {
  for (int64_t s = 0; s < n_stats; ++s) {
    double running = 0.0;
    for (int64_t b = 0; b + 1 < n_bins; ++b) {
      running += sums[b * n_stats + s];
      to[b * n_stats + s] = static_cast<float>(running);
    }
    to[(n_bins - 1) * n_stats + s] = static_cast<float>(sums[(n_bins - 1) * n_stats + s]);
  }
}

// Partitions the segment `rows` (count rows) stably: the left rows in
// place, the right ones after, without a branch on where a row goes; the
// split feature's bins read by tiles (a feature's bins together: a leaf's
// rows near each other share cache lines), a few rows ahead.  Returns the
// left rows, or -1 when a row is out of range; counts each side's rows in
// `positive` (when given) into n_positive_at.
int64_t Partition(const Rule& rule, const BinTiles& tiles, const uint8_t* column,
                  int64_t feature, int64_t n_rows, const uint8_t* positive, int32_t* rows,
                  int64_t count, std::vector<int32_t>& right_rows, int64_t* n_positive_at) {
  right_rows.resize(count);
  int32_t* right = right_rows.data();
  int64_t n_left = 0, n_right = 0;
  for (int64_t j = 0; j < count; ++j) {
    if (j + kAhead < count) {
      const int64_t ahead = rows[j + kAhead];
      if (ahead >= 0 && ahead < n_rows) __builtin_prefetch(column + tiles.At(feature, ahead));
    }
    const int32_t r = rows[j];
    if (r < 0 || r >= n_rows) return -1;
    const bool goes_right = rule.GoesRight(column[tiles.At(feature, r)]);
    rows[n_left] = r;  // (n_left <= j: a place already read)
    right[n_right] = r;
    n_left += !goes_right;
    n_right += goes_right;
    if (positive) n_positive_at[goes_right] += positive[r] != 0;
  }
  std::copy(right, right + n_right, rows + n_left);
  return n_left;
}

// The running sums of the rows `child` (increasing) into out[f, summed];
// false when a bin is out of range.
bool SumChild(const uint8_t* bins, int64_t n_features, const float* stats, int64_t n_stats,
              const int32_t* child, int64_t n_child, int64_t n_bins, int64_t summed,
              std::vector<double>& sums_buffer, float* out) {
  sums_buffer.resize(kBlock * kAnyBin * n_stats);
  double* sums = sums_buffer.data();
  for (int64_t f = 0; f < n_features; f += kBlock) {
    const int64_t n_block = std::min(kBlock, n_features - f);
    std::fill(sums, sums + n_block * kAnyBin * n_stats, 0.0);
    if (SumRows(bins, n_features, stats, child, n_child, f, n_block, n_stats, sums) >= n_bins) {
      return false;
    }
    for (int64_t k = 0; k < n_block; ++k) {
      float* to = out + ((f + k) * 2 + summed) * n_bins * n_stats;
      WriteRunning(sums + k * kAnyBin * n_stats, n_bins, n_stats, to);
    }
  }
  return true;
}

// The other child's out[f, 1 - summed]: the parent's (table[best]) minus
// the summed one's where `subtract` (else zero: the root's empty right),
// then both children's kept as leaves best and new_leaf of the table
// (leaves past it: not kept).
void KeepChildren(float* out, float* table, int64_t n_leaves, int64_t n_features,
                  int64_t per_feature, int64_t summed, bool subtract, int64_t best,
                  int64_t new_leaf) {
  const int64_t leaf_size = n_features * per_feature;
  const float* parent = subtract && best >= 0 && best < n_leaves ? table + best * leaf_size
                                                                   : nullptr;
  for (int64_t f = 0; f < n_features; ++f) {
    const float* from = out + (f * 2 + summed) * per_feature;
    float* to = out + (f * 2 + 1 - summed) * per_feature;
    for (int64_t i = 0; i < per_feature; ++i) {
      to[i] = parent ? parent[f * per_feature + i] - from[i] : 0.0f;
    }
  }
  for (int64_t c = 0; c < 2; ++c) {
    const int64_t leaf = c == 0 ? best : new_leaf;
    if (leaf < 0 || leaf >= n_leaves) continue;
    for (int64_t f = 0; f < n_features; ++f) {
      std::copy(out + (f * 2 + c) * per_feature, out + (f * 2 + c + 1) * per_feature,
                table + leaf * leaf_size + f * per_feature);
    }
  }
}

ffi::Error LeafSplitImpl(ffi::Buffer<ffi::U8> tiled, ffi::Buffer<ffi::U8> bins,
                         ffi::Buffer<ffi::F32> stats, ffi::Buffer<ffi::S32> order_in,
                         ffi::Buffer<ffi::F32> table_in, ffi::Buffer<ffi::U8> row_positive,
                         ffi::Buffer<ffi::S32> leaves, ffi::Buffer<ffi::S32> segment,
                         ffi::Buffer<ffi::S32> rule_in, ffi::Buffer<ffi::U32> category_left,
                         int64_t n_bins, bool smaller, ffi::ResultBuffer<ffi::S32> order_out,
                         ffi::ResultBuffer<ffi::F32> table_out,
                         ffi::ResultBuffer<ffi::F32> result, ffi::ResultBuffer<ffi::S32> rows) {
  auto bin_dims = bins.dimensions();  // (n_rows, n_features)
  auto stat_dims = stats.dimensions();
  auto table_dims = table_in.dimensions();
  if (bin_dims.size() != 2 || stat_dims.size() != 2 || table_dims.size() != 4 ||
      leaves.element_count() != 2 || segment.element_count() != 2 ||
      rule_in.element_count() != 3 || category_left.element_count() != 8) {
    return ffi::Error::InvalidArgument("jaxboost leaf split: bad ranks");
  }
  const int64_t n_rows = bin_dims[0], n_features = bin_dims[1], n_stats = stat_dims[1];
  const int64_t n_leaves = table_dims[0], n_positive = row_positive.element_count();
  if (stat_dims[0] != n_rows || order_in.element_count() != n_rows ||
      tiled.element_count() != n_rows * n_features || table_dims[1] != n_features ||
      table_dims[2] != n_bins || table_dims[3] != n_stats ||
      (n_positive != 0 && n_positive != n_rows) || n_bins < 1 || n_bins > kAnyBin) {
    return ffi::Error::InvalidArgument("jaxboost leaf split: shapes disagree");
  }
  const int64_t first = segment.typed_data()[0], count = segment.typed_data()[1];
  const int32_t* rule_at = rule_in.typed_data();
  const int64_t feature = rule_at[0];
  if (first < 0 || count < 0 || first + count > n_rows || feature < 0 || feature >= n_features) {
    return ffi::Error::InvalidArgument("jaxboost leaf split: segment or feature out of range");
  }
  const uint32_t* words = category_left.typed_data();
  const Rule rule{rule_at[1], n_bins - 1, rule_at[2] != 0,
                  std::any_of(words, words + 8, [](uint32_t w) { return w != 0; }), words};
  int32_t* order = order_out->typed_data();
  float* table = table_out->typed_data();
  const int64_t per_feature = n_bins * n_stats;
  // (both aliased by the caller: a copy only if not)
  if (order != order_in.typed_data()) {
    std::memcpy(order, order_in.typed_data(), n_rows * sizeof(int32_t));
  }
  if (table != table_in.typed_data()) {
    std::memcpy(table, table_in.typed_data(),
                n_leaves * n_features * per_feature * sizeof(float));
  }
  thread_local Scratch scratch;

  const uint8_t* positive = n_positive ? row_positive.typed_data() : nullptr;
  int64_t n_positive_at[2] = {0, 0};
  int32_t* rows_at = order + first;
  const int64_t n_left =
      Partition(rule, BinTiles(n_features, n_rows), tiled.typed_data(), feature, n_rows,
                positive, rows_at, count, scratch.right, n_positive_at);
  if (n_left < 0) return ffi::Error::InvalidArgument("jaxboost leaf split: a row out of range");
  const int64_t n_right = count - n_left;
  int32_t* counted = rows->typed_data();
  counted[0] = static_cast<int32_t>(n_left);
  counted[1] = static_cast<int32_t>(n_right);
  counted[2] = static_cast<int32_t>(positive ? n_positive_at[0] : n_left);
  counted[3] = static_cast<int32_t>(positive ? n_positive_at[1] : n_right);

  const int64_t summed = smaller && n_right < n_left ? 1 : 0;
  float* out = result->typed_data();
  if (!SumChild(bins.typed_data(), n_features, stats.typed_data(), n_stats,
                summed ? rows_at + n_left : rows_at, summed ? n_right : n_left, n_bins, summed,
                scratch.sums, out)) {
    return ffi::Error::InvalidArgument("jaxboost leaf split: a bin out of range");
  }
  KeepChildren(out, table, n_leaves, n_features, per_feature, summed, smaller,
               leaves.typed_data()[0], leaves.typed_data()[1]);
  return ffi::Error::Success();
}

// JaxboostRowMajorBins: bins (n_rows, n_features) row by row from `tiled`
// (n_features, n_rows) stored by tiles of rows (bin_tiles.h).
ffi::Error RowMajorBinsImpl(ffi::Buffer<ffi::U8> tiled, ffi::ResultBuffer<ffi::U8> bins) {
  auto dims = tiled.dimensions();
  if (dims.size() != 2 || bins->element_count() != tiled.element_count()) {
    return ffi::Error::InvalidArgument("jaxboost row-major bins: shapes disagree");
  }
  const int64_t n_features = dims[0];
  const BinTiles tiles(n_features, dims[1]);
  const uint8_t* from = tiled.typed_data();
  uint8_t* to = bins->typed_data();
  constexpr int64_t kRows = 64;  // a block of rows: a cache line of each feature's bins
  std::vector<uint8_t> block(n_features * kRows);
  tiles.ForEachTile([&](int64_t t0, int64_t t1, int64_t shift) {
    const int64_t pitch = t1 - t0;
    const uint8_t* tile = from + t0 + shift;
    for (int64_t r0 = 0; r0 < pitch; r0 += kRows) {
      const int64_t n = std::min(kRows, pitch - r0);
      for (int64_t f = 0; f < n_features; ++f) {
        std::memcpy(block.data() + f * kRows, tile + f * pitch + r0, n);
      }
      for (int64_t r = 0; r < n; ++r) {
        uint8_t* row = to + (t0 + r0 + r) * n_features;
        for (int64_t f = 0; f < n_features; ++f) row[f] = block[f * kRows + r];
      }
    }
  });
  return ffi::Error::Success();
}

// JaxboostLeafOfRow: leaf_of_row[order[start[l] + j]] = l for j < count[l]:
// every row's leaf from the leaves' segments of `order` (rows in none: 0).
ffi::Error LeafOfRowImpl(ffi::Buffer<ffi::S32> order, ffi::Buffer<ffi::S32> start,
                         ffi::Buffer<ffi::S32> count, ffi::ResultBuffer<ffi::S32> leaf_of_row) {
  const int64_t n_rows = order.element_count(), n_leaves = start.element_count();
  if (count.element_count() != n_leaves || leaf_of_row->element_count() != n_rows) {
    return ffi::Error::InvalidArgument("jaxboost leaf of row: shapes disagree");
  }
  const int32_t* rows = order.typed_data();
  int32_t* leaf = leaf_of_row->typed_data();
  std::fill(leaf, leaf + n_rows, 0);
  for (int64_t l = 0; l < n_leaves; ++l) {
    const int64_t first = start.typed_data()[l], n = count.typed_data()[l];
    if (n == 0) continue;
    if (first < 0 || n < 0 || first + n > n_rows) {
      return ffi::Error::InvalidArgument("jaxboost leaf of row: a segment out of range");
    }
    for (int64_t j = first; j < first + n; ++j) {
      const int32_t r = rows[j];
      if (r < 0 || r >= n_rows) {
        return ffi::Error::InvalidArgument("jaxboost leaf of row: a row out of range");
      }
      leaf[r] = static_cast<int32_t>(l);
    }
  }
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxboostLeafSplit, LeafSplitImpl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::U8>>()
                                  .Arg<ffi::Buffer<ffi::U8>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::U8>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Attr<int64_t>("n_bins")
                                  .Attr<bool>("smaller")
                                  .Ret<ffi::Buffer<ffi::S32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::S32>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxboostRowMajorBins, RowMajorBinsImpl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::U8>>()
                                  .Ret<ffi::Buffer<ffi::U8>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxboostLeafOfRow, LeafOfRowImpl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Ret<ffi::Buffer<ffi::S32>>());
