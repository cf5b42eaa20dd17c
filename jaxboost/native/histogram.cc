// Histogram kernels for jaxboost on CPU, called from XLA through its FFI.
// Built on first use by jaxboost/native_library.py; the plain reference
// these must equal is jaxboost/histogram.py.
//
// Two handlers, both on one shard of rows (one CPU device, one thread):
//
//   JaxboostHistogramRoot: every row's statistics summed by (feature, node,
//     bin), as jaxboost.histogram.build_histograms does, in float64.
//   JaxboostHistogramChildren: a level's histograms from its parents'
//     (float64) ones.  For every parent only the child with fewer rows on this
//     shard is summed; its sibling is the parent minus that child, the
//     subtraction LightGBM and XGBoost use.  A level then passes over at most
//     half of the rows.  float64 keeps the difference exact to ~1e-16 of the
//     parent's sums, far below the float32 the split search works in.
//
// Shapes (row-major):
//   bins         (n_features, n_rows) uint8, each < n_bins
//   node_of_row  (n_rows,) int32 node within the level, in [0, n_nodes)
//   row_stats    (n_rows, n_stats) float32
//   parent_hist  (n_features, n_nodes / 2, n_bins, n_stats) float64
//   result       (n_features, n_nodes, n_bins, n_stats) float64
//   cumulative   (n_features, n_nodes, n_bins, n_stats) float32: the result
//                summed over value bins 0..b (running sums), the missing bin
//                (the last) as it is: what the split search needs, so XLA
//                does not have to run a cumulative sum

#include <algorithm>
#include <cstdint>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

// The rows a pass sums, grouped by node: row index and its statistics,
// contiguous; node k's rows are [start[k], start[k + 1]).  Reused between
// calls (one per thread) so that a level does not fault in fresh pages.
struct RowList {
  std::vector<int32_t> row;
  std::vector<float> stats;
  std::vector<int64_t> start;
};

// Rows are summed in tiles of this many list entries: every feature block
// passes over a tile while its statistics are still in L2, so the statistics
// are read from memory once per level, not once per feature block.
constexpr int64_t kTileRows = 8192;

// hist[f][node][bin][s] += stats of list entries [begin, end), all of `node`.
// kBlock features share the pass, so that their updates are independent.
// kAllRows: the list is every row in order (the root), read in place.
template <int kStats, int kBlock, bool kAllRows>
void AccumulateRun(const uint8_t* const* feature_bins, double* const* node_hist,
                   const RowList& list, const float* stats, int64_t stride, int64_t begin,
                   int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    const int64_t r = kAllRows ? i : list.row[i];
    const float* s = stats + i * stride;
    for (int k = 0; k < kBlock; ++k) {
      double* p = node_hist[k] + feature_bins[k][r] * stride;
      for (int64_t j = 0; j < (kStats > 0 ? kStats : stride); ++j) p[j] += s[j];
    }
  }
}

// Sums list entries [t0, t1) (grouped by node: node k's entries are
// [start[k], start[k + 1])) for the kBlock features from first_feature.
template <int kStats, int kBlock, bool kAllRows>
void AccumulateTile(const uint8_t* bins, int64_t n_rows, int64_t first_feature,
                    const RowList& list, const float* stats, int64_t stride, int64_t n_bins,
                    int64_t n_nodes, const int64_t* start, int64_t first_node, int64_t t0,
                    int64_t t1, double* hist) {
  const int64_t node_size = n_bins * stride;
  const int64_t feature_size = n_nodes * node_size;
  const uint8_t* feature_bins[kBlock];
  for (int k = 0; k < kBlock; ++k) feature_bins[k] = bins + (first_feature + k) * n_rows;
  for (int64_t node = first_node; node < n_nodes && start[node] < t1; ++node) {
    const int64_t begin = std::max(start[node], t0), end = std::min(start[node + 1], t1);
    if (begin >= end) continue;
    double* node_hist[kBlock];
    for (int k = 0; k < kBlock; ++k) {
      node_hist[k] = hist + (first_feature + k) * feature_size + node * node_size;
    }
    AccumulateRun<kStats, kBlock, kAllRows>(feature_bins, node_hist, list, stats, stride, begin,
                                            end);
  }
}

template <int kStats, bool kAllRows>
void AccumulateStats(const uint8_t* bins, int64_t n_rows, int64_t n_features,
                     const RowList& list, const float* all_stats, int64_t n_stats,
                     int64_t n_bins, int64_t n_nodes, double* hist) {
  const float* stats = kAllRows ? all_stats : list.stats.data();
  const int64_t root_start[2] = {0, n_rows};
  const int64_t* start = kAllRows ? root_start : list.start.data();
  const int64_t n_list = start[n_nodes];
  int64_t first_node = 0;
  for (int64_t t0 = 0; t0 < n_list; t0 += kTileRows) {
    const int64_t t1 = std::min(t0 + kTileRows, n_list);
    while (start[first_node + 1] <= t0) ++first_node;
    int64_t f = 0;
    for (; f + 4 <= n_features; f += 4) {
      AccumulateTile<kStats, 4, kAllRows>(bins, n_rows, f, list, stats, n_stats, n_bins, n_nodes,
                                          start, first_node, t0, t1, hist);
    }
    for (; f < n_features; ++f) {
      AccumulateTile<kStats, 1, kAllRows>(bins, n_rows, f, list, stats, n_stats, n_bins, n_nodes,
                                          start, first_node, t0, t1, hist);
    }
  }
}

// Sums the list's rows, or with `all_stats` every row of a one-node level.
// `hist` must hold zeros where the list's nodes are summed.
void Accumulate(const uint8_t* bins, int64_t n_rows, int64_t n_features, const RowList& list,
                const float* all_stats, int64_t n_stats, int64_t n_bins, int64_t n_nodes,
                double* hist) {
  const bool all = all_stats != nullptr;
  if (n_stats == 2 && all) {
    AccumulateStats<2, true>(bins, n_rows, n_features, list, all_stats, n_stats, n_bins,
                             n_nodes, hist);
  } else if (n_stats == 2) {
    AccumulateStats<2, false>(bins, n_rows, n_features, list, all_stats, n_stats, n_bins,
                              n_nodes, hist);
  } else if (all) {
    AccumulateStats<0, true>(bins, n_rows, n_features, list, all_stats, n_stats, n_bins,
                             n_nodes, hist);
  } else {
    AccumulateStats<0, false>(bins, n_rows, n_features, list, all_stats, n_stats, n_bins,
                              n_nodes, hist);
  }
}

// Lists the rows whose node is kept, grouped by node (stable: rows in
// increasing order within a node).  `count` holds the rows per node.  Rows of
// dropped nodes are written to a spare slot past the end, so the loop has no
// unpredictable branch.
void ListRows(const int32_t* node, const float* stats, int64_t n_rows, int64_t n_stats,
              const std::vector<int64_t>& count, const std::vector<uint8_t>& keep,
              RowList* list) {
  const int64_t n_nodes = static_cast<int64_t>(count.size());
  list->start.assign(n_nodes + 1, 0);
  for (int64_t k = 0; k < n_nodes; ++k) {
    list->start[k + 1] = list->start[k] + (keep[k] ? count[k] : 0);
  }
  const int64_t n_list = list->start[n_nodes];
  list->row.resize(n_list + 1);
  list->stats.resize((n_list + 1) * n_stats);
  std::vector<int64_t> next(list->start.begin(), list->start.end() - 1);
  for (int64_t k = 0; k < n_nodes; ++k) {
    if (!keep[k]) next[k] = n_list;  // the spare slot, never advanced
  }
  std::vector<int64_t> step(keep.begin(), keep.end());
  int32_t* row = list->row.data();
  float* listed = list->stats.data();
  for (int64_t r = 0; r < n_rows; ++r) {
    const int32_t k = node[r];
    const int64_t i = next[k];
    next[k] += step[k];
    row[i] = static_cast<int32_t>(r);
    for (int64_t j = 0; j < n_stats; ++j) listed[i * n_stats + j] = stats[r * n_stats + j];
  }
}

ffi::Error CheckInputs(ffi::Buffer<ffi::U8>& bins, ffi::Buffer<ffi::S32>& node_of_row,
                       ffi::Buffer<ffi::F32>& row_stats, int64_t n_nodes, int64_t n_bins,
                       std::vector<int64_t>* count) {
  auto bins_dims = bins.dimensions();
  auto stats_dims = row_stats.dimensions();
  if (bins_dims.size() != 2 || stats_dims.size() != 2 || node_of_row.dimensions().size() != 1) {
    return ffi::Error::InvalidArgument("jaxboost histogram: bad ranks");
  }
  const int64_t n_rows = bins_dims[1];
  if (stats_dims[0] != n_rows || node_of_row.dimensions()[0] != n_rows) {
    return ffi::Error::InvalidArgument("jaxboost histogram: row counts differ");
  }
  if (n_bins < 1 || n_bins > 256 || n_nodes < 1) {
    return ffi::Error::InvalidArgument("jaxboost histogram: n_bins in [1, 256], n_nodes >= 1");
  }
  const int32_t* node = node_of_row.typed_data();
  count->assign(n_nodes, 0);
  for (int64_t r = 0; r < n_rows; ++r) {
    if (node[r] < 0 || node[r] >= n_nodes) {
      return ffi::Error::InvalidArgument("jaxboost histogram: node_of_row out of range");
    }
    ++(*count)[node[r]];
  }
  return ffi::Error::Success();
}

thread_local RowList tls_list;

// cumulative[f][node][b] = sum of hist[f][node][0..b] for value bins, and
// the missing bin (the last) copied; summed in float64, then rounded.
void RunningSums(const double* hist, int64_t n_features, int64_t n_nodes, int64_t n_bins,
                 int64_t n_stats, float* cumulative) {
  std::vector<double> running(n_stats);
  for (int64_t fn = 0; fn < n_features * n_nodes; ++fn) {
    const double* h = hist + fn * n_bins * n_stats;
    float* c = cumulative + fn * n_bins * n_stats;
    std::fill(running.begin(), running.end(), 0.0);
    for (int64_t b = 0; b + 1 < n_bins; ++b) {
      for (int64_t j = 0; j < n_stats; ++j) {
        running[j] += h[b * n_stats + j];
        c[b * n_stats + j] = static_cast<float>(running[j]);
      }
    }
    for (int64_t j = 0; j < n_stats; ++j) {
      c[(n_bins - 1) * n_stats + j] = static_cast<float>(h[(n_bins - 1) * n_stats + j]);
    }
  }
}

// One parent's children: rest = from - part (float64), and both children's
// running sums over the value bins (float32; the missing bin, last, as is).
template <int kStats>
void SubtractAndRun(const double* from, const double* part, double* rest, float* part_running,
                    float* rest_running, int64_t n_bins, int64_t n_stats_runtime) {
  const int64_t n_stats = kStats > 0 ? kStats : n_stats_runtime;
  double sum_part[8] = {0}, sum_rest[8] = {0};
  std::vector<double> wide_part, wide_rest;
  double* run_part = sum_part;
  double* run_rest = sum_rest;
  if (n_stats > 8) {
    wide_part.assign(n_stats, 0.0);
    wide_rest.assign(n_stats, 0.0);
    run_part = wide_part.data();
    run_rest = wide_rest.data();
  }
  for (int64_t b = 0; b < n_bins; ++b) {
    const bool value_bin = b + 1 < n_bins;
    for (int64_t j = 0; j < n_stats; ++j) {
      const int64_t at = b * n_stats + j;
      const double difference = from[at] - part[at];
      rest[at] = difference;
      if (value_bin) {
        run_part[j] += part[at];
        run_rest[j] += difference;
        part_running[at] = static_cast<float>(run_part[j]);
        rest_running[at] = static_cast<float>(run_rest[j]);
      } else {
        part_running[at] = static_cast<float>(part[at]);
        rest_running[at] = static_cast<float>(difference);
      }
    }
  }
}

ffi::Error RootImpl(ffi::Buffer<ffi::U8> bins, ffi::Buffer<ffi::S32> node_of_row,
                    ffi::Buffer<ffi::F32> row_stats, ffi::ResultBuffer<ffi::F64> result,
                    ffi::ResultBuffer<ffi::F32> cumulative, int64_t n_nodes, int64_t n_bins) {
  std::vector<int64_t> count;
  if (auto err = CheckInputs(bins, node_of_row, row_stats, n_nodes, n_bins, &count);
      err.failure()) {
    return err;
  }
  const int64_t n_features = bins.dimensions()[0], n_rows = bins.dimensions()[1];
  const int64_t n_stats = row_stats.dimensions()[1];
  std::fill(result->typed_data(), result->typed_data() + result->element_count(), 0.0);
  if (n_nodes == 1) {  // the root: every row, in place
    Accumulate(bins.typed_data(), n_rows, n_features, tls_list, row_stats.typed_data(), n_stats,
               n_bins, n_nodes, result->typed_data());
  } else {
    ListRows(node_of_row.typed_data(), row_stats.typed_data(), n_rows, n_stats, count,
             std::vector<uint8_t>(n_nodes, 1), &tls_list);
    Accumulate(bins.typed_data(), n_rows, n_features, tls_list, nullptr, n_stats, n_bins,
               n_nodes, result->typed_data());
  }
  RunningSums(result->typed_data(), n_features, n_nodes, n_bins, n_stats,
              cumulative->typed_data());
  return ffi::Error::Success();
}

ffi::Error ChildrenImpl(ffi::Buffer<ffi::U8> bins, ffi::Buffer<ffi::S32> node_of_row,
                        ffi::Buffer<ffi::F32> row_stats, ffi::Buffer<ffi::F64> parent_hist,
                        ffi::ResultBuffer<ffi::F64> result, ffi::ResultBuffer<ffi::F32> cumulative,
                        int64_t n_bins) {
  auto parent_dims = parent_hist.dimensions();
  const int64_t n_features = bins.dimensions()[0], n_rows = bins.dimensions()[1];
  const int64_t n_stats = row_stats.dimensions()[1];
  if (parent_dims.size() != 4 || parent_dims[0] != n_features || parent_dims[2] != n_bins ||
      parent_dims[3] != n_stats) {
    return ffi::Error::InvalidArgument("jaxboost histogram: parent histogram shape");
  }
  const int64_t n_parents = parent_dims[1], n_nodes = 2 * n_parents;
  std::vector<int64_t> count;
  if (auto err = CheckInputs(bins, node_of_row, row_stats, n_nodes, n_bins, &count);
      err.failure()) {
    return err;
  }
  // the child with fewer rows here is summed (ties: the left one)
  std::vector<uint8_t> summed(n_nodes, 0);
  for (int64_t p = 0; p < n_parents; ++p) {
    summed[2 * p + (count[2 * p + 1] < count[2 * p] ? 1 : 0)] = 1;
  }
  ListRows(node_of_row.typed_data(), row_stats.typed_data(), n_rows, n_stats, count, summed,
           &tls_list);
  const int64_t node_size = n_bins * n_stats;
  double* hist = result->typed_data();
  for (int64_t f = 0; f < n_features; ++f) {
    for (int64_t k = 0; k < n_nodes; ++k) {
      if (summed[k]) std::fill_n(hist + (f * n_nodes + k) * node_size, node_size, 0.0);
    }
  }
  Accumulate(bins.typed_data(), n_rows, n_features, tls_list, nullptr, n_stats, n_bins, n_nodes,
             hist);
  const double* parent = parent_hist.typed_data();
  float* running = cumulative->typed_data();
  for (int64_t f = 0; f < n_features; ++f) {
    for (int64_t p = 0; p < n_parents; ++p) {
      const int64_t summed_child = summed[2 * p] ? 2 * p : 2 * p + 1;
      const int64_t other_child = 4 * p + 1 - summed_child;
      const int64_t part_at = (f * n_nodes + summed_child) * node_size;
      const int64_t rest_at = (f * n_nodes + other_child) * node_size;
      if (n_stats == 2) {
        SubtractAndRun<2>(parent + (f * n_parents + p) * node_size, hist + part_at,
                          hist + rest_at, running + part_at, running + rest_at, n_bins, n_stats);
      } else {
        SubtractAndRun<0>(parent + (f * n_parents + p) * node_size, hist + part_at,
                          hist + rest_at, running + part_at, running + rest_at, n_bins, n_stats);
      }
    }
  }
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxboostHistogramRoot, RootImpl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::U8>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
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
                                  .Ret<ffi::Buffer<ffi::F64>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Attr<int64_t>("n_bins"));
