// Histogram kernels for jaxboost on CPU, called from XLA through its FFI.
// Built on first use by jaxboost/native_library.py; the plain reference
// these must equal is jaxboost/histogram.py.
//
// Two handlers for float32 statistics and two for quantised ones (below),
// all on one shard of rows (one CPU device, one thread):
//
//   JaxboostHistogramRoot: every row's statistics summed by (feature, node,
//     bin), as jaxboost.histogram.build_histograms does, in float64.
//   JaxboostHistogramChildren: a level's histograms from its parents'
//     (float64) ones.  It routes the rows of the level above by that level's
//     splits and returns where they went (route_rows.h).  For every parent
//     only one child is summed, the one of smaller hessian sum on this shard
//     (its rows listed as they are routed; see ChildrenLevel); its sibling is
//     the parent minus that child, the subtraction LightGBM and XGBoost use.
//     A level then passes over about half of the rows or fewer.  float64
//     keeps the difference exact to ~1e-16 of the parent's sums, far below
//     the float32 the split search works in.
//
// Shapes (row-major):
//   bins         (n_features, n_rows) uint8, each < n_bins, stored by tiles of
//                rows (bin_tiles.h)
//   node_of_row  (n_rows,) int32 node within the level, in [0, n_nodes); for
//                the children kernels, within the level above, in
//                [0, n_nodes / 2)
//   row_stats    (n_rows, n_stats) float32
//   parent_hist  (n_features, n_nodes / 2, n_bins, n_stats) float64
//   feature, threshold_bin, missing_left  (n_nodes / 2,) int32, int32, bool:
//                the splits of the level above (children kernels)
//   category_left (n_nodes / 2, 8) uint32: the bins each split of the level
//                above sends left, all zero at numeric splits; or (0,)
//                without categorical features (route_rows.h)
//   slot_start   (0,) int32: the histograms padded, as below; or
//                (n_features + 1,) int32: packed (hist_layout.h), feature
//                f's value bins and then its missing bin in slots
//                [slot_start[f], slot_start[f + 1]) of every node, every
//                (n_features, n_nodes, n_bins) below (n_nodes, n_slots) for
//                parent_hist and result, (n_slots, n_nodes) for cumulative
//   has_missing  (0,) bool with the padded layout; packed, (n_features,)
//                bool: 0 where a feature has no missing values in these
//                rows (its bins are summed unclamped: hist_layout.h)
//   parent_node, parent_slot  (0,) int32 each: the level's histograms hold
//                every node (n_nodes = 2 n_parents); or (n_pairs,) int32 each
//                (leaf-wise growth: its live nodes only, LevelPairs): slots
//                2 j and 2 j + 1 of result and cumulative (n_nodes = 2
//                n_pairs) hold the children of node parent_node[j] of the
//                level above (-1: padding, zero), whose sums are slot
//                parent_slot[j] of parent_hist; the other nodes' rows are
//                routed and not summed
//   row_positive (n_rows,) bool: the rows of positive weight, tallied by node
//                of the level as they are routed (float children kernel); or
//                (0,): none tallied
//   next         (n_rows,) int32 node within the level (children kernels)
//   node_rows    (n_nodes,) int32: row_positive's rows of each node of the
//                level (every node, live or not); (0,) without row_positive
//   result       (n_features, n_nodes, n_bins, n_stats) float64
//   cumulative   (n_features, n_nodes, n_bins, n_stats) float32: the result
//                summed over value bins 0..b (running sums), the missing bin
//                (the last) as it is: what the split search needs, so XLA
//                does not have to run a cumulative sum
//
// Quantised statistics (JaxboostHistogramRootQuantised / ...ChildrenQuantised,
// LightGBM 4's quantised training): every row's (gradient j, hessian j) pair
// of integers comes packed into one int64, gradient * 2^32 + hessian, so one
// integer add sums both: the sums are exact (subtraction too) and the adds
// were 1.4x to 1.7x faster than two floats into doubles added one by one
// (benchmarks/micro/histogram_accumulators.cc); added as a pair (EntryStats),
// the float root pass takes about 1.15x the packed one's time,
//   row_stats    (n_rows, 2 K) int32: K little-endian int64 words per row
//                (jaxboost.histogram_native.packed_pairs), each half's sum
//                below 2^31 in magnitude
//   scale        (2 K,) float32, what one unit of each output column (the K
//                gradients, then the K hessians) is worth
// The exact sums stay packed (one int64 a pair),
//   parent_hist / result  (n_features, n_nodes(/2), n_bins, K) int64
// and the running sums come out scaled back to float32, as above.

#include <algorithm>
#include <climits>
#include <cstdint>
#include <type_traits>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "bin_tiles.h"
#include "hist_layout.h"
#include "route_rows.h"
#include "running_sums.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

// The rows a pass sums: where each row's bins start in the tiles
// (BinTiles::Start, once per row rather than once per row and block of
// features) and its statistics, contiguous.  Grouped by node (ListRows):
// node k's rows are [start[k], start[k + 1]); or by groups of nodes
// (ListRowsByGroup), with where each entry's node's histograms start.
// Reused between calls (one per thread) so that a level does not fault in
// fresh pages.
//
// The three arrays share one allocation, their starts kListStagger bytes
// apart modulo kListSetSpan, so that entry i of each never falls in the same
// cache set.  Three vectors could be placed anywhere: glibc put them end to
// end on its heap, entry i of each 4063248 bytes apart, the same L2 set on a
// Zen 4 (1 MiB, 8 ways, sets repeating every 128 KiB).  There
// benchmarks/micro/children_level.cc (507904 rows, "cold") listed the rows
// of 4 to 32 nodes in 4.3 to 5.1 ms instead of 0.56, and whole levels took
// 10.3 to 11.2 ms instead of 4.7 to 6.3; in a 1M-row log-loss fit the
// children levels went from 11 to 13 ms to 5.5 to 7 ms per call.
constexpr int64_t kListSetSpan = int64_t{1} << 17;
constexpr int64_t kListStagger = 682 * 64;  // about a third of kListSetSpan

template <typename Stat>
struct RowList {
  int64_t* bin_at = nullptr;
  Stat* stats = nullptr;
  // lists by group: node * node_size for every entry (computed once per row,
  // not once per row and block of features: the pass is 5 to 8% faster)
  int64_t* offset = nullptr;
  std::vector<int64_t> start;
  int64_t size = 0;  // lists by group: entries

  // Points the arrays at room for `n_entries` entries of `n_stats`
  // statistics each (earlier contents are not kept).
  void Reserve(int64_t n_entries, int64_t n_stats) {
    const int64_t bytes = n_entries * std::max<int64_t>(8, n_stats * sizeof(Stat));
    const int64_t region =
        (bytes + kListSetSpan - 1) / kListSetSpan * kListSetSpan + kListStagger;
    const size_t words = static_cast<size_t>((3 * region + 64) / 8);
    if (storage_.size() < words) storage_.resize(words);
    const uintptr_t address = reinterpret_cast<uintptr_t>(storage_.data());
    char* base = reinterpret_cast<char*>(storage_.data()) + ((64 - address % 64) % 64);
    bin_at = reinterpret_cast<int64_t*>(base);
    offset = reinterpret_cast<int64_t*>(base + region);
    stats = reinterpret_cast<Stat*>(base + 2 * region);
  }

 private:
  std::vector<int64_t> storage_;
};

// How a kernel's statistics are stored and summed.
//   FloatSums: float32 columns summed into float64, one per output column.
//   PackedSums: int64 words each holding a (gradient j, hessian j) pair of
//     integers; stored word j feeds output columns j and K + j, scaled.
//
// A level below the root lists its summed children's rows by groups of
// 2^kGroupShift nodes, in row order within a group (ListRowsByGroup,
// RouteAndList): up to 1024 nodes (depth 11) every row in row order.
// A list node by node (ListRows) reads every cache line of the bins once per
// node, and in a fit the bins come from memory.
// benchmarks/micro/children_level.cc on 507904 rows x 28 features with
// "cold" (64 MiB written before each pass), packed, whole children levels in
// ms at 32 / 64 / 128 / 256 / 512 nodes: by groups of 8 nodes 4.2 to 4.9 /
// 7.0 to 7.3 / 10.1 / 15.4 / 22.7, in row order 4.1 / 5.0 / 6.8 / 8.9 /
// 18.3; the same at 2 to 16 nodes.  (Float sums were listed node by node
// below 16 nodes until their adds were paired, EntryStats, and their rows
// listed as routed: see ChildrenLevel.)
constexpr int kGroupShift = 10;

struct FloatSums {
  using Stat = float;
  using Acc = double;
  static constexpr int kParts = 1;
  int64_t n_stored;  // 2 K [+ 1]: K gradients, K hessians [, the weight]
  void Split(double sum, double* parts) const { parts[0] = sum; }
  // the hessian sum (over outputs) of one bin's n_stored sums
  double Hessian(const double* bin) const {
    const int64_t n_outputs = n_stored / 2;
    double total = 0.0;
    for (int64_t k = n_outputs; k < 2 * n_outputs; ++k) total += bin[k];
    return total;
  }
  int64_t Column(int64_t j, int /*part*/) const { return j; }
  float Value(double running, int64_t /*column*/) const { return static_cast<float>(running); }
};

struct PackedSums {
  using Stat = int64_t;
  using Acc = int64_t;
  static constexpr int kParts = 2;
  int64_t n_stored;      // K
  const float* scale;    // (2 K,)
  // gradient * 2^32 + hessian: the hessian is the low word read as signed,
  // the gradient what remains, shifted down (exact while both fit in int32)
  void Split(int64_t sum, int64_t* parts) const {
    const int64_t low = static_cast<int32_t>(static_cast<uint32_t>(sum));
    parts[0] = (sum - low) >> 32;
    parts[1] = low;
  }
  int64_t Column(int64_t j, int part) const { return part * n_stored + j; }
  int64_t Hessian(const int64_t* bin) const {
    int64_t total = 0;
    for (int64_t j = 0; j < n_stored; ++j) {
      int64_t parts[2];
      Split(bin[j], parts);
      total += parts[1];
    }
    return total;
  }
  float Value(int64_t running, int64_t column) const {
    return static_cast<float>(static_cast<double>(running) * scale[column]);
  }
};

// Rows are summed in tiles of this many list entries: every feature block
// passes over a tile while its statistics are still in L2, so the statistics
// are read from memory once per level, not once per feature block.  At the
// root (every row in place) a tile of entries lies within a tile of the bins.
constexpr int64_t kTileRows = 8192;
static_assert(kBinTileRows % kTileRows == 0, "root tiles within tiles of bins");

// Where a pass reads a block of kBlock features' bins: from `column[k]`
// (feature first_feature + k, offset so that column[k][r] is row r's bin) for
// the rows of one tile in place, or for listed rows of any tile from the
// tiled `bins`; and `last[k]`, the slot of the feature's missing bin (a
// pass that clamps sums a bin in slot min(bin, last[k]): HistLayout).
struct BlockBins {
  const uint8_t* const* column;
  const uint8_t* bins;
  BinTiles tiles;
  int64_t first_feature;
  const uint8_t* last;
};

// One entry's kStats statistics, read once and added to the histograms of
// every feature of a block.
template <typename Stat, typename Acc, int kStats>
struct EntryStats {
  Stat value[kStats];
  explicit EntryStats(const Stat* __restrict stats) {
    for (int j = 0; j < kStats; ++j) value[j] = stats[j];
  }
  void AddTo(Acc* __restrict sums) const {
    for (int j = 0; j < kStats; ++j) sums[j] += value[j];
  }
};

#if defined(__SSE2__)
// Two float statistics (gradient, hessian) into double sums: converted once
// as a pair and added with one instruction.  GCC 13 emitted two scalar
// conversions and two scalar adds for every feature; these are the same
// additions, so the same sums.  On 507904 rows x 28 features from memory,
// SumLevel / SumChildren at 2, 4, 8, 16, 32 nodes went from 6.8 / 4.8, 4.8,
// 5.1, 5.8, 6.7 ms to 3.9 / 3.2, 3.3, 3.5, 4.3, 5.1 ms; a 1M-row float
// log-cosh fit from about 39 to about 31 ms per round.
template <>
struct EntryStats<float, double, 2> {
  __m128d pair;
  explicit EntryStats(const float* __restrict stats)
      : pair(_mm_cvtps_pd(
            _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(stats))))) {}
  void AddTo(double* __restrict sums) const {
    _mm_storeu_pd(sums, _mm_add_pd(_mm_loadu_pd(sums), pair));
  }
};

// The same with a third float, the row count of min_child_samples,
// converted once too.
template <>
struct EntryStats<float, double, 3> {
  __m128d pair;
  double count;
  explicit EntryStats(const float* __restrict stats)
      : pair(_mm_cvtps_pd(
            _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(stats))))),
        count(stats[2]) {}
  void AddTo(double* __restrict sums) const {
    _mm_storeu_pd(sums, _mm_add_pd(_mm_loadu_pd(sums), pair));
    sums[2] += count;
  }
};
#endif

// The inner loop of every pass: list entries [begin, end) added to their
// bins in kBlock features' histograms, hist[k][at + slot(k, r) * stride + j]
// += stats[i * stride + j], with slot(k, r) = min(bin(k, r), last[k]) with
// kClamp (blocks of a packed layout with missing values; elsewhere bin(k, r)
// itself: the min keeps four more values in registers, and GCC then spilled
// the histogram pointers, which made 300k-row padded fits 15% and rank.train
// fits 8% slower) and r the entry's row (i itself in place; listed,
// its bins start at `bin_at[i]`) and `at` its node's offset (`offset[i]`, or
// 0 without offsets).  The pointers and statistics are copied to restrict
// locals first: otherwise the compiler must assume that a histogram store may change
// them (packed statistics and their sums are both int64) and reloads them
// after every store; built as the shared library (-fPIC), GCC 13 then kept
// the block's bin pointers on the stack, and the root pass on 500k rows x 28
// features took 4.5 ms instead of 3.0 ms.  Never inlined, for the same
// reason: inlined into the children kernels' handler (one large function),
// the listed pass reloaded five spilled values from the stack for every
// entry; a 1M-row quantised fit's children levels (traces, per round) took
// 4.6 to 4.9 / 4.1 / 3.9 to 4.1 / 4.0 to 4.3 / 4.6 to 5.6 ms at 2 to 32
// nodes, and 3.9 / 3.4 / 3.4 / 3.7 / 4.3 ms as a function of its own.
template <typename Stat, typename Acc, int kStats, int kBlock, bool kListed, bool kOffsets,
          bool kClamp>
__attribute__((noinline)) void AddEntries(const BlockBins& block, Acc* const* block_hist,
                                          int64_t stride, const int64_t* bin_at,
                                          const int64_t* offset, const Stat* stats,
                                          int64_t begin, int64_t end) {
  static_assert(kBlock == 1 || kBlock == 4, "blocks of 1 or 4 features");
  constexpr int kLast = kBlock - 1;  // features 1 to 3 are read when kBlock is 4
  const uint8_t* __restrict b0 = kListed ? nullptr : block.column[0];
  const uint8_t* __restrict b1 = kListed ? nullptr : block.column[std::min(1, kLast)];
  const uint8_t* __restrict b2 = kListed ? nullptr : block.column[std::min(2, kLast)];
  const uint8_t* __restrict b3 = kListed ? nullptr : block.column[std::min(3, kLast)];
  // listed rows: feature first_feature + k of a row whose bins start at p
  // is at p + (first_feature + k) * pitch, the pitch kBinTileRows before the
  // last tile
  const uint8_t* __restrict full_tiles = block.bins + block.first_feature * kBinTileRows;
  const int64_t last_tile = block.tiles.Start(block.tiles.last_start);
  const int64_t last_pitch = block.tiles.last_pitch;
  const uint8_t* __restrict in_last_tile = block.bins + block.first_feature * last_pitch;
  uint8_t last[kBlock] = {};
  if constexpr (kClamp) {
    for (int k = 0; k < kBlock; ++k) last[k] = block.last[k];
  }
  Acc* __restrict h0 = block_hist[0];
  Acc* __restrict h1 = block_hist[std::min(1, kLast)];
  Acc* __restrict h2 = block_hist[std::min(2, kLast)];
  Acc* __restrict h3 = block_hist[std::min(3, kLast)];
  const int64_t* __restrict bins_at = bin_at;
  const int64_t* __restrict offsets = offset;
  const Stat* __restrict st = stats;
  const int64_t n_stats = kStats > 0 ? kStats : stride;
  for (int64_t i = begin; i < end; ++i) {
    const int64_t p = kListed ? bins_at[i] : i;  // in place: the row
    const int64_t at = kOffsets ? offsets[i] : 0;
    const Stat* __restrict s = st + i * n_stats;
    uint8_t bin[kBlock];
    if constexpr (kListed) {
      if (p < last_tile) [[likely]] {
        for (int k = 0; k < kBlock; ++k) bin[k] = full_tiles[p + k * kBinTileRows];
      } else {
        for (int k = 0; k < kBlock; ++k) bin[k] = in_last_tile[p + k * last_pitch];
      }
    } else {
      bin[0] = b0[p];
      if constexpr (kBlock == 4) {
        bin[1] = b1[p];
        bin[2] = b2[p];
        bin[3] = b3[p];
      }
    }
    if constexpr (kClamp) {
      for (int k = 0; k < kBlock; ++k) bin[k] = std::min(bin[k], last[k]);
    }
    if constexpr (kStats > 0) {
      const EntryStats<Stat, Acc, kStats> entry(s);
      const auto add = [&](Acc* __restrict hist, int64_t b) {
        entry.AddTo(hist + at + b * kStats);
      };
      add(h0, bin[0]);
      if constexpr (kBlock == 4) {
        add(h1, bin[1]);
        add(h2, bin[2]);
        add(h3, bin[3]);
      }
    } else {
      for (int k = 0; k < kBlock; ++k) {
        Acc* p = block_hist[k] + at + bin[k] * n_stats;
        for (int64_t j = 0; j < n_stats; ++j) p[j] += s[j];
      }
    }
  }
}

// hist[f][node][bin][s] += stats of list entries [begin, end), all of `node`.
// kBlock features share the pass, so that their updates are independent.
// kAllRows: the list is every row in order (the root), read in place.
template <typename Stat, typename Acc, int kStats, int kBlock, bool kAllRows, bool kClamp>
void AccumulateRun(const BlockBins& block, Acc* const* node_hist, const RowList<Stat>& list,
                   const Stat* stats, int64_t stride, int64_t begin, int64_t end) {
  const int64_t* bin_at = kAllRows ? nullptr : list.bin_at;
  AddEntries<Stat, Acc, kStats, kBlock, !kAllRows, false, kClamp>(block, node_hist, stride,
                                                                  bin_at, nullptr, stats, begin,
                                                                  end);
}

// Sums list entries [t0, t1) (grouped by node: node k's entries are
// [start[k], start[k + 1])) for the kBlock features from first_feature.
template <typename Stat, typename Acc, int kStats, int kBlock, bool kAllRows, bool kClamp>
void AccumulateTile(const uint8_t* bins, int64_t n_rows, int64_t n_features,
                    int64_t first_feature, const RowList<Stat>& list, const Stat* stats,
                    int64_t stride, const HistLayout& layout, const int64_t* start,
                    int64_t first_node, int64_t t0, int64_t t1, Acc* hist) {
  const BinTiles tiles(n_features, n_rows);
  // in place (the root) the entries [t0, t1) are rows within one tile of the
  // bins; `column` is not read for listed rows
  const uint8_t* column[kBlock];
  for (int k = 0; k < kBlock; ++k) column[k] = bins + tiles.At(first_feature + k, t0) - t0;
  const BlockBins block{column, bins, tiles, first_feature, &layout.last[first_feature]};
  for (int64_t node = first_node; node < layout.n_nodes && start[node] < t1; ++node) {
    const int64_t begin = std::max(start[node], t0), end = std::min(start[node + 1], t1);
    if (begin >= end) continue;
    Acc* node_hist[kBlock];
    for (int k = 0; k < kBlock; ++k) {
      node_hist[k] = hist + layout.Segment(first_feature + k, node) * stride;
    }
    AccumulateRun<Stat, Acc, kStats, kBlock, kAllRows, kClamp>(block, node_hist, list, stats,
                                                               stride, begin, end);
  }
}

// body(std::true_type()) where a block of `count` features from `first`
// may hold missing bins to clamp (HistLayout::may_miss), else
// body(std::false_type())
template <typename Body>
void WithClamp(const HistLayout& layout, int64_t first, int64_t count, Body&& body) {
  if (layout.MayMiss(first, count)) {
    body(std::true_type());
  } else {
    body(std::false_type());
  }
}

template <typename Stat, typename Acc, int kStats, bool kAllRows>
void AccumulateStats(const uint8_t* bins, int64_t n_rows, int64_t n_features,
                     const RowList<Stat>& list, const Stat* all_stats, int64_t n_stats,
                     const HistLayout& layout, Acc* hist) {
  const Stat* stats = kAllRows ? all_stats : list.stats;
  const int64_t root_start[2] = {0, n_rows};
  const int64_t* start = kAllRows ? root_start : list.start.data();
  const int64_t n_list = start[layout.n_nodes];
  int64_t first_node = 0;
  for (int64_t t0 = 0; t0 < n_list; t0 += kTileRows) {
    const int64_t t1 = std::min(t0 + kTileRows, n_list);
    while (start[first_node + 1] <= t0) ++first_node;
    const auto sum_block = [&](int64_t f, auto block) {
      WithClamp(layout, f, block(), [&](auto clamp) {
        AccumulateTile<Stat, Acc, kStats, block(), kAllRows, clamp()>(
            bins, n_rows, n_features, f, list, stats, n_stats, layout, start, first_node, t0, t1,
            hist);
      });
    };
    int64_t f = 0;
    for (; f + 4 <= n_features; f += 4) sum_block(f, std::integral_constant<int, 4>());
    for (; f < n_features; ++f) sum_block(f, std::integral_constant<int, 1>());
  }
}

// Sums the list's rows, or with `all_stats` every row of a one-node level.
// `hist` must hold zeros where the list's nodes are summed.  kUsual: the
// common number of stored columns, specialised (2 floats: [grad, hess]; 1
// packed word).
template <int kUsual, typename Stat, typename Acc>
void Accumulate(const uint8_t* bins, int64_t n_rows, int64_t n_features,
                const RowList<Stat>& list, const Stat* all_stats, int64_t n_stats,
                const HistLayout& layout, Acc* hist) {
  const bool all = all_stats != nullptr;
  if (n_stats == kUsual && all) {
    AccumulateStats<Stat, Acc, kUsual, true>(bins, n_rows, n_features, list, all_stats, n_stats,
                                             layout, hist);
  } else if (n_stats == kUsual) {
    AccumulateStats<Stat, Acc, kUsual, false>(bins, n_rows, n_features, list, all_stats,
                                              n_stats, layout, hist);
  } else if (n_stats == kUsual + 1 && all) {  // (and a row count: min_child_samples)
    AccumulateStats<Stat, Acc, kUsual + 1, true>(bins, n_rows, n_features, list, all_stats,
                                                 n_stats, layout, hist);
  } else if (n_stats == kUsual + 1) {
    AccumulateStats<Stat, Acc, kUsual + 1, false>(bins, n_rows, n_features, list, all_stats,
                                                  n_stats, layout, hist);
  } else if (all) {
    AccumulateStats<Stat, Acc, 0, true>(bins, n_rows, n_features, list, all_stats, n_stats,
                                        layout, hist);
  } else {
    AccumulateStats<Stat, Acc, 0, false>(bins, n_rows, n_features, list, all_stats, n_stats,
                                         layout, hist);
  }
}

// body(std::integral_constant<int, kUsual>) when n_stats is kUsual (or
// kUsual + 1: with a row count), else
// body(std::integral_constant<int, 0>): a row loop inside `body` then copies
// the usual count of statistics with a loop of fixed length (as a branch
// inside the loop, GCC 13 left the list passes 2x slower)
template <int kUsual, typename Body>
void WithStatCount(int64_t n_stats, Body&& body) {
  if (n_stats == kUsual) {
    body(std::integral_constant<int, kUsual>());
  } else if (n_stats == kUsual + 1) {  // (and a row count: min_child_samples)
    body(std::integral_constant<int, kUsual + 1>());
  } else {
    body(std::integral_constant<int, 0>());
  }
}

// to[j] = from[j] for j < n_stats (kStats: n_stats fixed when compiled, or 0)
template <int kStats, typename Stat>
inline void CopyStats(const Stat* __restrict from, Stat* __restrict to, int64_t n_stats) {
  for (int64_t j = 0; j < (kStats > 0 ? kStats : n_stats); ++j) to[j] = from[j];
}

// Lists the rows whose node is kept, grouped by node (stable: rows in
// increasing order within a node).  `count` holds the rows per node.  Rows of
// dropped nodes are written to a spare slot past the end, so the loop has no
// unpredictable branch.
template <int kUsual, typename Stat>
void ListRows(const int32_t* node, const Stat* stats, int64_t n_rows, int64_t n_stats,
              const std::vector<int64_t>& count, const std::vector<uint8_t>& keep,
              const BinTiles& tiles, RowList<Stat>* list) {
  const int64_t n_nodes = static_cast<int64_t>(count.size());
  list->start.assign(n_nodes + 1, 0);
  for (int64_t k = 0; k < n_nodes; ++k) {
    list->start[k + 1] = list->start[k] + (keep[k] ? count[k] : 0);
  }
  const int64_t n_list = list->start[n_nodes];
  list->Reserve(n_list + 1, n_stats);
  std::vector<int64_t> next(list->start.begin(), list->start.end() - 1);
  for (int64_t k = 0; k < n_nodes; ++k) {
    if (!keep[k]) next[k] = n_list;  // the spare slot, never advanced
  }
  std::vector<int64_t> step(keep.begin(), keep.end());
  int64_t* __restrict bin_at = list->bin_at;
  Stat* __restrict listed = list->stats;
  int64_t* __restrict next_entry = next.data();
  const int64_t* __restrict node_step = step.data();
  const int32_t* __restrict row_node = node;
  const Stat* __restrict row_stats = stats;
  WithStatCount<kUsual>(n_stats, [&](auto fixed) {
    tiles.ForEachTile([&](int64_t t0, int64_t t1, int64_t shift) {
      for (int64_t r = t0; r < t1; ++r) {
        const int32_t k = row_node[r];
        const int64_t i = next_entry[k];
        next_entry[k] += node_step[k];
        bin_at[i] = r + shift;
        CopyStats<fixed()>(row_stats + r * n_stats, listed + i * n_stats, n_stats);
      }
    });
  });
}

// Appends rows [t0, t1) of a tile (Start(r) = r + shift) whose node is kept
// to a list in row order (its entries must have room for every row, plus
// one: a dropped row is written and then overwritten by the next).
template <int kUsual, typename Stat>
void ListTileInRowOrder(const int32_t* node, const Stat* stats, int64_t n_stats,
                        const uint8_t* keep, int64_t node_size, int64_t t0, int64_t t1,
                        int64_t shift, RowList<Stat>* list) {
  int64_t* __restrict bin_at = list->bin_at;
  int64_t* __restrict listed_offset = list->offset;
  Stat* __restrict listed = list->stats;
  const Stat* __restrict row_stats = stats;
  const int32_t* __restrict row_node = node;
  const uint8_t* __restrict kept = keep;
  int64_t i = list->size;
  WithStatCount<kUsual>(n_stats, [&](auto fixed) {
    for (int64_t r = t0; r < t1; ++r) {
      const int32_t k = row_node[r];
      bin_at[i] = r + shift;
      listed_offset[i] = k * node_size;
      CopyStats<fixed()>(row_stats + r * n_stats, listed + i * n_stats, n_stats);
      i += kept[k];
    }
  });
  list->size = i;
}

// Lists the rows whose node is kept by groups of 2^group_shift consecutive
// nodes, in row order within a group, with their nodes' offsets (node *
// node_size, the node's histograms within a feature's).  A list grouped by
// node reads every cache line of the bins once per node; in row order (one
// group) once, but each block of features then updates the histograms of
// every node; groups bound those to what stays in L1 (see kGroupShift).
template <int kUsual, typename Stat>
void ListRowsByGroup(const int32_t* node, const Stat* stats, int64_t n_rows, int64_t n_stats,
                     const std::vector<int64_t>& count, const std::vector<uint8_t>& keep,
                     int group_shift, int64_t node_size, const BinTiles& tiles,
                     RowList<Stat>* list) {
  const int64_t n_nodes = static_cast<int64_t>(count.size());
  const int64_t n_groups = ((n_nodes - 1) >> group_shift) + 1;
  list->Reserve(n_rows + 1, n_stats);
  int64_t* __restrict bin_at = list->bin_at;
  int64_t* __restrict listed_offset = list->offset;
  Stat* __restrict listed = list->stats;
  const Stat* __restrict row_stats = stats;
  const int32_t* __restrict row_node = node;
  if (n_groups == 1) {  // row order
    list->size = 0;
    tiles.ForEachTile([&](int64_t t0, int64_t t1, int64_t shift) {
      ListTileInRowOrder<kUsual>(node, stats, n_stats, keep.data(), node_size, t0, t1, shift,
                                 list);
    });
    return;
  }
  std::vector<int64_t> next(n_groups + 1, 0);  // the last: a spare slot for dropped rows
  for (int64_t k = 0; k < n_nodes; ++k) {
    if (keep[k]) next[(k >> group_shift) + 1] += count[k];
  }
  for (int64_t g = 0; g < n_groups; ++g) next[g + 1] += next[g];
  const int64_t n_list = next[n_groups];
  std::vector<int64_t> slot(n_nodes);  // where node k's rows go: its group, or the spare
  for (int64_t k = 0; k < n_nodes; ++k) slot[k] = keep[k] ? k >> group_shift : n_groups;
  int64_t* __restrict next_entry = next.data();
  const int64_t* __restrict slot_of_node = slot.data();
  const uint8_t* __restrict kept = keep.data();
  WithStatCount<kUsual>(n_stats, [&](auto fixed) {
    tiles.ForEachTile([&](int64_t t0, int64_t t1, int64_t shift) {
      for (int64_t r = t0; r < t1; ++r) {  // no branch: dropped rows share the spare slot
        const int32_t k = row_node[r];
        const int64_t i = next_entry[slot_of_node[k]];
        next_entry[slot_of_node[k]] += kept[k];
        bin_at[i] = r + shift;
        listed_offset[i] = k * node_size;
        CopyStats<fixed()>(row_stats + r * n_stats, listed + i * n_stats, n_stats);
      }
    });
  });
  list->size = n_list;
}

// hist[f][node of entry][bin][s] += stats of list entries [t0, t1), for the
// kBlock features from first_feature (a list by groups: entries of any node,
// their offsets node * layout.node_stride * stride).
template <typename Stat, typename Acc, int kStats, int kBlock, bool kClamp>
void AccumulateEntriesRun(const uint8_t* bins, int64_t n_rows, int64_t n_features,
                          int64_t first_feature, const RowList<Stat>& list, int64_t stride,
                          const HistLayout& layout, int64_t t0, int64_t t1, Acc* hist) {
  Acc* feature_hist[kBlock];
  for (int k = 0; k < kBlock; ++k) {
    feature_hist[k] = hist + layout.first[first_feature + k] * stride;
  }
  const BlockBins block{nullptr, bins, BinTiles(n_features, n_rows), first_feature,
                        &layout.last[first_feature]};
  AddEntries<Stat, Acc, kStats, kBlock, true, true, kClamp>(
      block, feature_hist, stride, list.bin_at, list.offset, list.stats, t0, t1);
}

template <int kUsual, typename Stat, typename Acc>
void AccumulateEntries(const uint8_t* bins, int64_t n_rows, int64_t n_features,
                       const RowList<Stat>& list, int64_t n_stats, const HistLayout& layout,
                       Acc* hist) {
  for (int64_t t0 = 0; t0 < list.size; t0 += kTileRows) {
    const int64_t t1 = std::min(t0 + kTileRows, list.size);
    int64_t f = 0;
    for (; f + 4 <= n_features; f += 4) {
      WithClamp(layout, f, 4, [&](auto clamp) {
        if (n_stats == kUsual) {
          AccumulateEntriesRun<Stat, Acc, kUsual, 4, clamp()>(bins, n_rows, n_features, f, list,
                                                              n_stats, layout, t0, t1, hist);
        } else if (n_stats == kUsual + 1) {
          AccumulateEntriesRun<Stat, Acc, kUsual + 1, 4, clamp()>(
              bins, n_rows, n_features, f, list, n_stats, layout, t0, t1, hist);
        } else {
          AccumulateEntriesRun<Stat, Acc, 0, 4, clamp()>(bins, n_rows, n_features, f, list,
                                                         n_stats, layout, t0, t1, hist);
        }
      });
    }
    for (; f < n_features; ++f) {
      WithClamp(layout, f, 1, [&](auto clamp) {
        AccumulateEntriesRun<Stat, Acc, 0, 1, clamp()>(bins, n_rows, n_features, f, list,
                                                       n_stats, layout, t0, t1, hist);
      });
    }
  }
}

// count[k] = the rows of node k; false if a node is outside [0, n_nodes).
bool CountRows(const int32_t* node, int64_t n_rows, int64_t n_nodes,
               std::vector<int64_t>* count) {
  // without branches, unsigned or 64-bit compares, so that it vectorises
  const int32_t limit = static_cast<int32_t>(n_nodes);
  int out_of_range = 0;
  for (int64_t r = 0; r < n_rows; ++r) out_of_range |= (node[r] < 0) | (node[r] >= limit);
  if (out_of_range) return false;
  if (n_nodes == 1) {  // the root
    count->assign(1, n_rows);
    return true;
  }
  // four interleaved tallies: consecutive rows of one node do not each wait
  // for the previous increment's store
  constexpr int kTallies = 4;
  std::vector<int64_t> tally(kTallies * n_nodes, 0);
  int64_t r = 0;
  for (; r + kTallies <= n_rows; r += kTallies) {
    for (int q = 0; q < kTallies; ++q) ++tally[q * n_nodes + node[r + q]];
  }
  for (; r < n_rows; ++r) ++tally[node[r]];
  count->assign(n_nodes, 0);
  for (int q = 0; q < kTallies; ++q) {
    for (int64_t k = 0; k < n_nodes; ++k) (*count)[k] += tally[q * n_nodes + k];
  }
  return true;
}

// Checks the shapes and that n_nodes and n_bins are in range.
ffi::Error CheckShapes(ffi::Buffer<ffi::U8>& bins, ffi::Buffer<ffi::S32>& node_of_row,
                       ffi::Span<const int64_t> stats_dims, int64_t n_nodes, int64_t n_bins) {
  auto bins_dims = bins.dimensions();
  if (bins_dims.size() != 2 || stats_dims.size() != 2 || node_of_row.dimensions().size() != 1) {
    return ffi::Error::InvalidArgument("jaxboost histogram: bad ranks");
  }
  const int64_t n_rows = bins_dims[1];
  if (stats_dims[0] != n_rows || node_of_row.dimensions()[0] != n_rows) {
    return ffi::Error::InvalidArgument("jaxboost histogram: row counts differ");
  }
  if (n_bins < 1 || n_bins > 256 || n_nodes < 1 || n_nodes > INT32_MAX) {
    return ffi::Error::InvalidArgument(
        "jaxboost histogram: n_bins in [1, 256], n_nodes in [1, 2^31)");
  }
  return ffi::Error::Success();
}

// Checks the shapes and node numbers of a level summed afresh and counts the
// rows of every node.
ffi::Error CheckInputs(ffi::Buffer<ffi::U8>& bins, ffi::Buffer<ffi::S32>& node_of_row,
                       ffi::Span<const int64_t> stats_dims, int64_t n_nodes, int64_t n_bins,
                       std::vector<int64_t>* count) {
  if (auto err = CheckShapes(bins, node_of_row, stats_dims, n_nodes, n_bins); err.failure()) {
    return err;
  }
  if (!CountRows(node_of_row.typed_data(), bins.dimensions()[1], n_nodes, count)) {
    return ffi::Error::InvalidArgument("jaxboost histogram: node_of_row out of range");
  }
  return ffi::Error::Success();
}

// A level below the root: checks the shapes, routes the rows of the level
// above (node_of_row, n_parents nodes) by its splits into `next`, and counts
// the rows of every child, in one pass (route_rows.h).
ffi::Error ReadParentSplits(ffi::Buffer<ffi::U8>& bins, ffi::Buffer<ffi::S32>& node_of_row,
                            ffi::Span<const int64_t> stats_dims, ffi::Buffer<ffi::S32>& feature,
                            ffi::Buffer<ffi::S32>& threshold_bin,
                            ffi::Buffer<ffi::PRED>& missing_left,
                            ffi::Buffer<ffi::U32>& category_left, int64_t n_parents,
                            int64_t n_bins, int64_t missing_bin, LevelSplits* splits) {
  if (auto err = CheckShapes(bins, node_of_row, stats_dims, 2 * n_parents, n_bins);
      err.failure()) {
    return err;
  }
  if (feature.element_count() != n_parents || threshold_bin.element_count() != n_parents ||
      missing_left.element_count() != n_parents) {
    return ffi::Error::InvalidArgument("jaxboost histogram: one split per parent expected");
  }
  if (!splits->Read(feature.typed_data(), threshold_bin.typed_data(), missing_left.typed_data(),
                    n_parents, bins.dimensions()[0])) {
    return ffi::Error::InvalidArgument("jaxboost histogram: split feature out of range");
  }
  if (!splits->ReadSets(category_left.typed_data(), category_left.element_count(), missing_bin)) {
    return ffi::Error::InvalidArgument("jaxboost histogram: category_left not (n_parents, 8)");
  }
  return ffi::Error::Success();
}

ffi::Error RouteChildren(ffi::Buffer<ffi::U8>& bins, ffi::Buffer<ffi::S32>& node_of_row,
                         ffi::Span<const int64_t> stats_dims, ffi::Buffer<ffi::S32>& feature,
                         ffi::Buffer<ffi::S32>& threshold_bin,
                         ffi::Buffer<ffi::PRED>& missing_left,
                         ffi::Buffer<ffi::U32>& category_left, int64_t n_parents, int64_t n_bins,
                         int64_t missing_bin, int32_t* next, std::vector<int64_t>* count) {
  LevelSplits splits;
  if (auto err = ReadParentSplits(bins, node_of_row, stats_dims, feature, threshold_bin,
                                  missing_left, category_left, n_parents, n_bins, missing_bin,
                                  &splits);
      err.failure()) {
    return err;
  }
  const int64_t n_features = bins.dimensions()[0], n_rows = bins.dimensions()[1];
  if (!RouteRows<true>(bins.typed_data(), BinTiles(n_features, n_rows), node_of_row.typed_data(),
                       splits, missing_bin, next, count)) {
    return ffi::Error::InvalidArgument("jaxboost histogram: node_of_row out of range");
  }
  return ffi::Error::Success();
}

// The nodes a level's histograms hold, as pairs of siblings: slots 2 j and
// 2 j + 1 hold the children of node node[j] of the level above (its split),
// whose sums are slot slot[j] of the level above's; node[j] -1: padding,
// empty.  Every node in order (identity) unless leaf-wise growth holds its
// live nodes only (jaxboost.engine.leafwise.live_slots): their rows are
// summed, the other nodes' rows routed and skipped.
struct LevelPairs {
  std::vector<int64_t> node;
  std::vector<int64_t> slot;
  // (2 n_parents,) the slot of every node of the level, 2 n_pairs (a spare
  // slot) where it has none; empty for the identity
  std::vector<int32_t> slot_of_child;

  static LevelPairs Identity(int64_t n_parents) {
    LevelPairs pairs;
    pairs.node.resize(n_parents);
    for (int64_t p = 0; p < n_parents; ++p) pairs.node[p] = p;
    pairs.slot = pairs.node;
    return pairs;
  }

  // From `parent_node` and `parent_slot` (n_pairs,) int32; false unless
  // every node is -1 or in [0, n_parents), held once, and its slot in [0,
  // n_parent_slots).
  bool Read(const int32_t* parent_node, const int32_t* parent_slot, int64_t n_pairs,
            int64_t n_parents, int64_t n_parent_slots) {
    node.resize(n_pairs);
    slot.resize(n_pairs);
    slot_of_child.assign(2 * n_parents, static_cast<int32_t>(2 * n_pairs));
    for (int64_t j = 0; j < n_pairs; ++j) {
      node[j] = parent_node[j];
      slot[j] = parent_slot[j];
      if (node[j] < 0) {
        if (node[j] != -1) return false;
        continue;
      }
      if (node[j] >= n_parents || slot[j] < 0 || slot[j] >= n_parent_slots) return false;
      if (slot_of_child[2 * node[j]] != 2 * n_pairs) return false;  // held twice
      slot_of_child[2 * node[j]] = static_cast<int32_t>(2 * j);
      slot_of_child[2 * node[j] + 1] = static_cast<int32_t>(2 * j + 1);
    }
    return true;
  }

  bool identity() const { return slot_of_child.empty(); }
  int64_t n_pairs() const { return static_cast<int64_t>(node.size()); }
};

// The child of every parent with the smaller hessian sum (ties: the left
// one), read off the parent's histogram of its split feature: a stand-in for
// the smaller row count that is known before the rows are routed, so that
// one pass routes them and lists the summed children's (RouteAndList).
// Either child gives the same histograms: exactly for quantised sums; for
// float ones to float64 rounding (~1e-16 of the parent's sums).
// `parent` lies as `layout` says, its missing bins in their last slots.
template <class Sums>
std::vector<uint8_t> LighterChildren(const typename Sums::Acc* parent, const Sums& sums,
                                     const LevelSplits& splits, const HistLayout& layout,
                                     const LevelPairs& pairs) {
  const int64_t n_pairs = pairs.n_pairs(), n_stored = sums.n_stored;
  std::vector<uint8_t> summed(2 * n_pairs, 0);
  for (int64_t j = 0; j < n_pairs; ++j) {
    const int64_t p = pairs.node[j];
    if (p < 0) {  // padding: no rows, the left child summed (to zero)
      summed[2 * j] = 1;
      continue;
    }
    const int64_t f = splits.feature[p], missing = layout.last[f];
    const auto* hist = parent + layout.Segment(f, pairs.slot[j]) * n_stored;
    typename Sums::Acc side[2] = {0, 0};  // hessian sums, left and right
    for (int64_t b = 0; b <= missing; ++b) {
      const int right = b == missing ? splits.missing_right[p] : splits.ValueRight(p, b);
      side[right] += sums.Hessian(hist + b * n_stored);
    }
    summed[2 * j + (side[1] < side[0] ? 1 : 0)] = 1;
  }
  return summed;
}

// The rows of positive weight of every node of a level (min_child_samples'
// rows, jaxboost.engine.split.child_check), tallied tile by tile as the rows
// are routed, their nodes still in cache: four interleaved tallies, so that
// consecutive rows of one node do not each wait for the previous store.
// Without `positive` nothing is tallied.
struct PositiveTally {
  static constexpr int kTallies = 4;
  const bool* positive;  // (n_rows,), or nullptr
  int64_t n_nodes;
  std::vector<int32_t> tally;

  PositiveTally(const bool* positive_rows, int64_t nodes)
      : positive(positive_rows), n_nodes(nodes),
        tally(positive_rows == nullptr ? 0 : kTallies * nodes, 0) {}

  // adds rows [t0, t1) of `next` (each in [0, n_nodes))
  void Add(const int32_t* next, int64_t t0, int64_t t1) {
    if (positive == nullptr) return;
    int32_t* __restrict counts = tally.data();
    const bool* __restrict weighted = positive;
    for (int64_t r = t0; r < t1; ++r) {
      counts[(r & (kTallies - 1)) * n_nodes + next[r]] += static_cast<int32_t>(weighted[r]);
    }
  }

  void Write(int32_t* node_rows) const {
    if (positive == nullptr) return;
    for (int64_t k = 0; k < n_nodes; ++k) {
      int32_t sum = 0;
      for (int q = 0; q < kTallies; ++q) sum += tally[q * n_nodes + k];
      node_rows[k] = sum;
    }
  }
};

// Routes the rows one level down (RouteTiles) and lists the rows of the
// children marked in `summed` in row order, each tile as soon as it is
// routed; false when a node is out of range.
template <int kUsual, typename Stat>
bool RouteAndList(const uint8_t* bins, const BinTiles& tiles, const int32_t* node,
                  const LevelSplits& splits, int64_t missing_bin, int32_t* next,
                  const Stat* stats, int64_t n_stats, const std::vector<uint8_t>& summed,
                  int64_t node_size, const LevelPairs& pairs, RowList<Stat>* list,
                  PositiveTally* tally) {
  const int64_t n_rows = tiles.last_start + tiles.last_pitch;
  list->Reserve(n_rows + 1, n_stats);
  list->size = 0;
  if (pairs.identity()) {
    return RouteTiles(bins, tiles, node, splits, missing_bin, next, [&](int64_t t0, int64_t t1) {
      ListTileInRowOrder<kUsual>(next, stats, n_stats, summed.data(), node_size, t0, t1,
                                 tiles.Start(t0) - t0, list);
      tally->Add(next, t0, t1);
    });
  }
  // rows listed by slot: a node without one goes to the spare slot, never summed
  std::vector<uint8_t> keep(summed);
  keep.push_back(0);
  std::vector<int32_t> slot_of_row(n_rows);
  const int32_t* __restrict slot_of_child = pairs.slot_of_child.data();
  return RouteTiles(bins, tiles, node, splits, missing_bin, next, [&](int64_t t0, int64_t t1) {
    for (int64_t r = t0; r < t1; ++r) slot_of_row[r] = slot_of_child[next[r]];
    ListTileInRowOrder<kUsual>(slot_of_row.data(), stats, n_stats, keep.data(), node_size, t0,
                               t1, tiles.Start(t0) - t0, list);
    tally->Add(next, t0, t1);
  });
}

thread_local RowList<float> tls_list;
thread_local RowList<int64_t> tls_packed_list;

// The (n_rows, 2 K) int32 words as the (n_rows, K) int64 they pack (XLA's
// buffers are aligned far beyond 8 bytes; x86 and ARM are little-endian).
const int64_t* PackedWords(ffi::Buffer<ffi::S32>& row_stats) {
  return reinterpret_cast<const int64_t*>(row_stats.typed_data());
}

// A level of one node or more summed afresh: `stats` (n_rows, n_stored),
// `result` as `layout` says, `cumulative` as its slot-major twin.
template <int kUsual, class Sums>
void SumLevel(const uint8_t* bins, int64_t n_features, int64_t n_rows, const int32_t* node,
              const typename Sums::Stat* stats, const std::vector<int64_t>& count,
              const HistLayout& layout, const Sums& sums, RowList<typename Sums::Stat>* list,
              typename Sums::Acc* result, float* cumulative) {
  using Acc = typename Sums::Acc;
  const int64_t n_stored = sums.n_stored, n_nodes = layout.n_nodes;
  std::fill_n(result, layout.n_slots() * n_stored, Acc(0));
  if (n_nodes == 1) {  // the root: every row, in place
    Accumulate<kUsual>(bins, n_rows, n_features, *list, stats, n_stored, layout, result);
  } else {
    ListRows<kUsual>(node, stats, n_rows, n_stored, count, std::vector<uint8_t>(n_nodes, 1),
                     BinTiles(n_features, n_rows), list);
    Accumulate<kUsual>(bins, n_rows, n_features, *list,
                       static_cast<const typename Sums::Stat*>(nullptr), n_stored, layout,
                       result);
  }
  WithStatCount<kUsual>(n_stored, [&](auto stored) {
    RunningSums<Sums, stored()>(result, layout, layout.SlotMajor(), sums, cumulative);
  });
}

// The child of every parent with fewer rows (ties: the left one): 1 at
// the children summed, 0 at those taken as the parent minus their sibling.
std::vector<uint8_t> SmallerChildren(const std::vector<int64_t>& count, int64_t n_parents) {
  std::vector<uint8_t> summed(2 * n_parents, 0);
  for (int64_t p = 0; p < n_parents; ++p) {
    summed[2 * p + (count[2 * p + 1] < count[2 * p] ? 1 : 0)] = 1;
  }
  return summed;
}

// A level below the root: for every parent the child marked in `summed` is
// summed, the other is the parent minus it.  With `listed` the list holds
// the summed children's rows in row order already (RouteAndList); else they
// are listed here from `count`.  `parent` lies as `parent_layout` says,
// `hist` as `layout` (its nodes the parents' children), `running` as its
// slot-major twin.
template <int kUsual, class Sums>
void SumChildren(const uint8_t* bins, int64_t n_features, int64_t n_rows, const int32_t* node,
                 const typename Sums::Stat* stats, const std::vector<int64_t>& count,
                 const std::vector<uint8_t>& summed, bool listed, const HistLayout& parent_layout,
                 const HistLayout& layout, const LevelPairs& pairs, const Sums& sums,
                 RowList<typename Sums::Stat>* list, const typename Sums::Acc* parent,
                 typename Sums::Acc* hist, float* running) {
  using Acc = typename Sums::Acc;
  const int64_t n_stored = sums.n_stored, n_out = n_stored * Sums::kParts;
  const HistLayout running_layout = layout.SlotMajor();
  const int64_t step = running_layout.bin_stride * n_out;
  layout.ZeroNodes(hist, n_stored, summed);
  layout.ZeroPadding(hist, n_stored);
  running_layout.ZeroPadding(running, n_out);
  if (!listed) {
    ListRowsByGroup<kUsual>(node, stats, n_rows, n_stored, count, summed, kGroupShift,
                            layout.node_stride * n_stored, BinTiles(n_features, n_rows), list);
  }
  AccumulateEntries<kUsual>(bins, n_rows, n_features, *list, n_stored, layout, hist);
  // a padding pair's parent: zeros (it has no rows)
  std::vector<Acc> no_parent(pairs.identity() ? 0 : 256 * n_stored, Acc(0));
  // by blocks of features, every pair's within a block (FeatureBlocks)
  const std::vector<int64_t> blocks =
      layout.FeatureBlocks(n_out * static_cast<int64_t>(sizeof(float)));
  for (size_t block = 0; block + 1 < blocks.size(); ++block) {
    for (int64_t j = 0; j < pairs.n_pairs(); ++j) {
      const int64_t summed_child = summed[2 * j] ? 2 * j : 2 * j + 1;
      const int64_t other_child = 4 * j + 1 - summed_child;
      for (int64_t f = blocks[block]; f < blocks[block + 1]; ++f) {
        const int64_t part = layout.Segment(f, summed_child);
        const int64_t rest = layout.Segment(f, other_child);
        float* part_running = running + running_layout.Segment(f, summed_child) * n_out;
        float* rest_running = running + running_layout.Segment(f, other_child) * n_out;
        const Acc* from = pairs.node[j] < 0
                              ? no_parent.data()
                              : parent + parent_layout.Segment(f, pairs.slot[j]) * n_stored;
        WithStatCount<kUsual>(n_stored, [&](auto stored) {
          SubtractAndRun<Sums, stored()>(from, hist + part * n_stored, hist + rest * n_stored,
                                         part_running, rest_running, layout.Bins(f), step,
                                         sums);
        });
      }
    }
  }
}

// The layout (HistLayout) of n_nodes nodes' histograms in a buffer of shape
// `dims`, n_stored values a slot: packed by `slot_start` (n_features + 1,)
// and `has_missing` (n_features,), or padded where they are empty; checks
// `dims` against it.
ffi::Error ReadLayout(ffi::Buffer<ffi::S32>& slot_start, ffi::Buffer<ffi::PRED>& has_missing,
                      ffi::Span<const int64_t> dims, int64_t n_features, int64_t n_nodes,
                      int64_t n_bins, int64_t n_stored, HistLayout* layout) {
  if (slot_start.element_count() == 0) {
    if (dims.size() != 4 || dims[0] != n_features || dims[1] != n_nodes || dims[2] != n_bins ||
        dims[3] != n_stored) {
      return ffi::Error::InvalidArgument("jaxboost histogram: padded histogram shape");
    }
    *layout = HistLayout::Padded(n_features, n_nodes, n_bins);
    return ffi::Error::Success();
  }
  if (static_cast<int64_t>(slot_start.element_count()) != n_features + 1 ||
      static_cast<int64_t>(has_missing.element_count()) != n_features || dims.size() != 3 ||
      dims[0] != n_nodes || dims[2] != n_stored) {
    return ffi::Error::InvalidArgument("jaxboost histogram: packed histogram shape");
  }
  if (!HistLayout::Packed(slot_start.typed_data(), has_missing.typed_data(), n_features, n_nodes,
                          dims[1], n_bins, layout)) {
    return ffi::Error::InvalidArgument(
        "jaxboost histogram: slot_start must rise by 2 to n_bins slots a feature, from 0 to at "
        "most the slots of a node");
  }
  return ffi::Error::Success();
}

ffi::Error CheckScale(ffi::Buffer<ffi::F32>& scale, int64_t n_columns) {
  if (n_columns % 2 != 0 || scale.dimensions().size() != 1 ||
      scale.dimensions()[0] != n_columns) {
    return ffi::Error::InvalidArgument(
        "jaxboost histogram: quantised statistics need 2 K columns and a (2 K,) scale");
  }
  return ffi::Error::Success();
}

// The root, or any level summed afresh, for either kind of statistics:
// `stats` (n_rows, n_stored) as Sums stores them, `result` of shape
// `result_dims`.
template <int kUsual, class Sums>
ffi::Error AfreshLevel(ffi::Buffer<ffi::U8>& bins, ffi::Buffer<ffi::S32>& node_of_row,
                       ffi::Span<const int64_t> stats_dims, const typename Sums::Stat* stats,
                       ffi::Buffer<ffi::S32>& slot_start, ffi::Buffer<ffi::PRED>& has_missing,
                       ffi::Span<const int64_t> result_dims,
                       typename Sums::Acc* result, float* cumulative, int64_t n_nodes,
                       int64_t n_bins, const Sums& sums, RowList<typename Sums::Stat>* list) {
  std::vector<int64_t> count;
  if (auto err = CheckInputs(bins, node_of_row, stats_dims, n_nodes, n_bins, &count);
      err.failure()) {
    return err;
  }
  const int64_t n_features = bins.dimensions()[0], n_rows = bins.dimensions()[1];
  HistLayout layout;
  if (auto err = ReadLayout(slot_start, has_missing, result_dims, n_features, n_nodes, n_bins,
                            sums.n_stored, &layout);
      err.failure()) {
    return err;
  }
  SumLevel<kUsual>(bins.typed_data(), n_features, n_rows, node_of_row.typed_data(), stats, count,
                   layout, sums, list, result, cumulative);
  return ffi::Error::Success();
}

ffi::Error RootImpl(ffi::Buffer<ffi::U8> bins, ffi::Buffer<ffi::S32> node_of_row,
                    ffi::Buffer<ffi::F32> row_stats, ffi::Buffer<ffi::S32> slot_start,
                    ffi::Buffer<ffi::PRED> has_missing, ffi::ResultBuffer<ffi::F64> result,
                    ffi::ResultBuffer<ffi::F32> cumulative, int64_t n_nodes, int64_t n_bins) {
  const FloatSums sums{row_stats.dimensions()[1]};
  return AfreshLevel<2>(bins, node_of_row, row_stats.dimensions(), row_stats.typed_data(),
                        slot_start, has_missing, result->dimensions(), result->typed_data(),
                        cumulative->typed_data(), n_nodes, n_bins, sums, &tls_list);
}

// A level below the root, for either kind of statistics: `stats` (n_rows,
// n_stored) and the parent's sums `parent` as Sums stores them, the parents'
// and the level's histograms laid out as `slot_start` says (ReadLayout).  Up
// to 1024 nodes (one list in row order) the rows are routed and the lighter
// children's listed in one pass (LighterChildren, RouteAndList); beyond, the
// rows are routed and counted first, and the children with fewer rows summed.
// Float sums were routed and counted first at every depth, and listed node
// by node below 16 nodes; listed as routed, the children levels at 2 / 4 /
// 8 / 16 / 32 nodes of a 1M-row float log-cosh fit (traces, ms per round,
// two runs) went from 3.95-4.11 / 3.22-3.34 / 3.23-3.40 / 3.71-3.88 / 4.25 to
// 3.79-3.88 / 2.91-3.01 / 2.91-3.01 / 3.09-3.21 / 3.77-3.86.  Which child a
// float level sums changes its sums' last bits only.
template <int kUsual, class Sums>
ffi::Error ChildrenLevel(ffi::Buffer<ffi::U8>& bins, ffi::Buffer<ffi::S32>& node_of_row,
                         ffi::Span<const int64_t> stats_dims, const typename Sums::Stat* stats,
                         ffi::Span<const int64_t> parent_dims, const typename Sums::Acc* parent,
                         ffi::Buffer<ffi::S32>& feature, ffi::Buffer<ffi::S32>& threshold_bin,
                         ffi::Buffer<ffi::PRED>& missing_left,
                         ffi::Buffer<ffi::U32>& category_left, ffi::Buffer<ffi::S32>& slot_start,
                         ffi::Buffer<ffi::PRED>& has_missing, ffi::Buffer<ffi::S32>& parent_node,
                         ffi::Buffer<ffi::S32>& parent_slot, int32_t* next,
                         ffi::Span<const int64_t> result_dims, typename Sums::Acc* result,
                         float* cumulative, int64_t n_bins,
                         int64_t missing_bin, const Sums& sums,
                         RowList<typename Sums::Stat>* list, PositiveTally* tally) {
  const int64_t n_features = bins.dimensions()[0], n_rows = bins.dimensions()[1];
  const int64_t n_parents = static_cast<int64_t>(feature.element_count());
  LevelPairs pairs = LevelPairs::Identity(n_parents);
  int64_t n_parent_slots = n_parents;  // the parents' sums: every parent, or the live ones
  if (parent_node.element_count() != 0) {  // the live nodes only (leaf-wise growth)
    if (parent_dims.size() < 2 || parent_slot.element_count() != parent_node.element_count()) {
      return ffi::Error::InvalidArgument("jaxboost histogram: parent_node and parent_slot shapes");
    }
    n_parent_slots = slot_start.element_count() == 0 ? parent_dims[1] : parent_dims[0];
    if (!pairs.Read(parent_node.typed_data(), parent_slot.typed_data(),
                    static_cast<int64_t>(parent_node.element_count()), n_parents,
                    n_parent_slots)) {
      return ffi::Error::InvalidArgument(
          "jaxboost histogram: parent_node must hold nodes of the level above at most once "
          "(or -1), parent_slot their slots in its sums");
    }
  }
  HistLayout parent_layout, layout;
  if (auto err = ReadLayout(slot_start, has_missing, parent_dims, n_features, n_parent_slots,
                            n_bins, sums.n_stored, &parent_layout);
      err.failure()) {
    return err;
  }
  if (auto err = ReadLayout(slot_start, has_missing, result_dims, n_features,
                            2 * pairs.n_pairs(), n_bins, sums.n_stored, &layout);
      err.failure()) {
    return err;
  }
  if (!pairs.identity() || 2 * n_parents <= (int64_t{1} << kGroupShift)) {  // row order
    LevelSplits splits;
    if (auto err = ReadParentSplits(bins, node_of_row, stats_dims, feature, threshold_bin,
                                    missing_left, category_left, n_parents, n_bins, missing_bin,
                                    &splits);
        err.failure()) {
      return err;
    }
    const std::vector<uint8_t> summed =
        LighterChildren(parent, sums, splits, parent_layout, pairs);
    if (!RouteAndList<kUsual>(bins.typed_data(), BinTiles(n_features, n_rows),
                              node_of_row.typed_data(), splits, missing_bin, next, stats,
                              sums.n_stored, summed, layout.node_stride * sums.n_stored, pairs,
                              list, tally)) {
      return ffi::Error::InvalidArgument("jaxboost histogram: node_of_row out of range");
    }
    SumChildren<kUsual>(bins.typed_data(), n_features, n_rows, next, stats, {}, summed, true,
                        parent_layout, layout, pairs, sums, list, parent, result, cumulative);
    return ffi::Error::Success();
  }
  std::vector<int64_t> count;
  if (auto err = RouteChildren(bins, node_of_row, stats_dims, feature, threshold_bin,
                               missing_left, category_left, n_parents, n_bins, missing_bin, next,
                               &count);
      err.failure()) {
    return err;
  }
  tally->Add(next, 0, n_rows);
  SumChildren<kUsual>(bins.typed_data(), n_features, n_rows, next, stats, count,
                      SmallerChildren(count, n_parents), false, parent_layout, layout, pairs,
                      sums, list, parent, result, cumulative);
  return ffi::Error::Success();
}

ffi::Error ChildrenImpl(ffi::Buffer<ffi::U8> bins, ffi::Buffer<ffi::S32> node_of_row,
                        ffi::Buffer<ffi::F32> row_stats, ffi::Buffer<ffi::F64> parent_hist,
                        ffi::Buffer<ffi::S32> feature, ffi::Buffer<ffi::S32> threshold_bin,
                        ffi::Buffer<ffi::PRED> missing_left, ffi::Buffer<ffi::U32> category_left,
                        ffi::Buffer<ffi::S32> slot_start,
                        ffi::Buffer<ffi::PRED> has_missing, ffi::Buffer<ffi::S32> parent_node,
                        ffi::Buffer<ffi::S32> parent_slot, ffi::Buffer<ffi::PRED> row_positive,
                        ffi::ResultBuffer<ffi::S32> next, ffi::ResultBuffer<ffi::F64> result,
                        ffi::ResultBuffer<ffi::F32> cumulative,
                        ffi::ResultBuffer<ffi::S32> node_rows, int64_t n_bins,
                        int64_t missing_bin) {
  const FloatSums sums{row_stats.dimensions()[1]};
  // row_positive (n_rows,) bool and node_rows (2 n_parents,): the rows of
  // positive weight of every node of the level; both (0,): none tallied
  const bool tallied = row_positive.element_count() != 0;
  if (tallied && (static_cast<int64_t>(row_positive.element_count()) !=
                      static_cast<int64_t>(node_of_row.element_count()) ||
                  node_rows->element_count() != 2 * feature.element_count())) {
    return ffi::Error::InvalidArgument(
        "jaxboost histogram: row_positive must be (n_rows,) and node_rows (2 n_parents,)");
  }
  PositiveTally tally(tallied ? row_positive.typed_data() : nullptr,
                      static_cast<int64_t>(2 * feature.element_count()));
  auto err = ChildrenLevel<2>(bins, node_of_row, row_stats.dimensions(), row_stats.typed_data(),
                              parent_hist.dimensions(), parent_hist.typed_data(), feature,
                              threshold_bin, missing_left, category_left, slot_start,
                              has_missing, parent_node, parent_slot, next->typed_data(),
                              result->dimensions(), result->typed_data(),
                              cumulative->typed_data(), n_bins, missing_bin, sums, &tls_list,
                              &tally);
  if (err.failure()) return err;
  tally.Write(node_rows->typed_data());
  return ffi::Error::Success();
}

ffi::Error RootQuantisedImpl(ffi::Buffer<ffi::U8> bins, ffi::Buffer<ffi::S32> node_of_row,
                             ffi::Buffer<ffi::S32> row_stats, ffi::Buffer<ffi::F32> scale,
                             ffi::Buffer<ffi::S32> slot_start,
                             ffi::Buffer<ffi::PRED> has_missing,
                             ffi::ResultBuffer<ffi::S64> result,
                             ffi::ResultBuffer<ffi::F32> cumulative, int64_t n_nodes,
                             int64_t n_bins) {
  if (auto err = CheckScale(scale, row_stats.dimensions()[1]); err.failure()) return err;
  const PackedSums sums{row_stats.dimensions()[1] / 2, scale.typed_data()};
  return AfreshLevel<1>(bins, node_of_row, row_stats.dimensions(), PackedWords(row_stats),
                        slot_start, has_missing, result->dimensions(), result->typed_data(),
                        cumulative->typed_data(), n_nodes, n_bins, sums, &tls_packed_list);
}

ffi::Error ChildrenQuantisedImpl(ffi::Buffer<ffi::U8> bins, ffi::Buffer<ffi::S32> node_of_row,
                                 ffi::Buffer<ffi::S32> row_stats, ffi::Buffer<ffi::F32> scale,
                                 ffi::Buffer<ffi::S64> parent_hist, ffi::Buffer<ffi::S32> feature,
                                 ffi::Buffer<ffi::S32> threshold_bin,
                                 ffi::Buffer<ffi::PRED> missing_left,
                                 ffi::Buffer<ffi::U32> category_left,
                                 ffi::Buffer<ffi::S32> slot_start,
                                 ffi::Buffer<ffi::PRED> has_missing,
                                 ffi::Buffer<ffi::S32> parent_node,
                                 ffi::Buffer<ffi::S32> parent_slot,
                                 ffi::ResultBuffer<ffi::S32> next,
                                 ffi::ResultBuffer<ffi::S64> result,
                                 ffi::ResultBuffer<ffi::F32> cumulative, int64_t n_bins,
                                 int64_t missing_bin) {
  if (auto err = CheckScale(scale, row_stats.dimensions()[1]); err.failure()) return err;
  const PackedSums sums{row_stats.dimensions()[1] / 2, scale.typed_data()};
  PositiveTally untallied(nullptr, 0);  // (quantised fits take no min_child_samples)
  return ChildrenLevel<1>(bins, node_of_row, row_stats.dimensions(), PackedWords(row_stats),
                          parent_hist.dimensions(), parent_hist.typed_data(), feature,
                          threshold_bin, missing_left, category_left, slot_start, has_missing,
                          parent_node, parent_slot, next->typed_data(),
                          result->dimensions(), result->typed_data(), cumulative->typed_data(),
                          n_bins, missing_bin, sums, &tls_packed_list, &untallied);
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxboostHistogramRoot, RootImpl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::U8>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::PRED>>()
                                  .Ret<ffi::Buffer<ffi::F64>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Attr<int64_t>("n_nodes")
                                  .Attr<int64_t>("n_bins"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxboostHistogramChildren, ChildrenImpl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::U8>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F64>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::PRED>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::PRED>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::PRED>>()
                                  .Ret<ffi::Buffer<ffi::S32>>()
                                  .Ret<ffi::Buffer<ffi::F64>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::S32>>()
                                  .Attr<int64_t>("n_bins")
                                  .Attr<int64_t>("missing_bin"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxboostHistogramRootQuantised, RootQuantisedImpl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::U8>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::PRED>>()
                                  .Ret<ffi::Buffer<ffi::S64>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Attr<int64_t>("n_nodes")
                                  .Attr<int64_t>("n_bins"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxboostHistogramChildrenQuantised, ChildrenQuantisedImpl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::U8>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::S64>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::PRED>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::PRED>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Ret<ffi::Buffer<ffi::S32>>()
                                  .Ret<ffi::Buffer<ffi::S64>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Attr<int64_t>("n_bins")
                                  .Attr<int64_t>("missing_bin"));
