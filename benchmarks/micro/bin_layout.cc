// The bins' layout for the native histogram kernel, alone: column-major
// (n_features, n_rows) uint8, what jaxboost stores, against blocks of 4
// features interleaved per row ((n_features / 4, n_rows, 4) uint8: one 32-bit
// word per row and block, "packing 4 bin bytes per word").  500k rows, 28
// features, 256 bins; the root (every row in order) and a level below it (the
// smaller children: the even nodes of a random assignment of rows to 2 to 32
// nodes, listed node by node), for float (gradient, hessian) pairs summed
// into doubles and for packed int64 words.  Best of 7 passes each.
//
//   g++ -O3 -std=c++17 benchmarks/micro/bin_layout.cc -o /tmp/bin_layout && /tmp/bin_layout
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "best_ms.h"

constexpr int64_t kTile = 8192;
constexpr int kBins = 256;

constexpr int kPasses = 7;

// hist[f][node][bin] += stats of the listed rows (node k's entries:
// [start[k], start[k + 1])), in tiles, 4 features per pass.
// kInterleaved: bins are (n_features / 4, n_rows, 4); else (n_features, n_rows).
// kAllRows: the list is every row in order.
template <typename Acc, typename Stat, int kStats, bool kInterleaved, bool kAllRows>
void Sum(const uint8_t* bins, int64_t n_rows, int n_features, int n_nodes, const int32_t* rows,
         const int64_t* start, int64_t n_list, const Stat* stats, Acc* hist) {
  for (int64_t t0 = 0; t0 < n_list; t0 += kTile) {
    const int64_t t1 = std::min(t0 + kTile, n_list);
    for (int f = 0; f < n_features; f += 4) {
      const uint8_t* column[4];
      for (int k = 0; k < 4; ++k) column[k] = bins + (f + k) * n_rows;
      const uint32_t* words = reinterpret_cast<const uint32_t*>(bins) + (f / 4) * n_rows;
      int node = 0;
      for (int64_t i = t0; i < t1; ++i) {
        while (start[node + 1] <= i) ++node;
        const int64_t r = kAllRows ? i : rows[i];
        const Stat* s = stats + i * kStats;
        const uint32_t word = kInterleaved ? words[r] : 0;
        for (int k = 0; k < 4; ++k) {
          const int64_t bin = kInterleaved ? (word >> (8 * k)) & 255 : column[k][r];
          Acc* p = hist + (((f + k) * n_nodes + node) * kBins + bin) * kStats;
          for (int j = 0; j < kStats; ++j) p[j] += s[j];
        }
      }
    }
  }
}

int main() {
  std::mt19937 rng(0);
  const int64_t n_rows = 500000;
  const int n_features = 28;
  std::vector<uint8_t> by_column(n_features * n_rows), interleaved(n_features * n_rows);
  for (auto& b : by_column) b = rng() % 255;
  for (int f = 0; f < n_features; ++f) {
    for (int64_t r = 0; r < n_rows; ++r) {
      interleaved[((f / 4) * n_rows + r) * 4 + f % 4] = by_column[f * n_rows + r];
    }
  }
  {
    std::vector<float> stats(n_rows * 2, 0.5f);
    std::vector<double> hist(n_features * kBins * 2);
    const int64_t start[2] = {0, n_rows};
    const double column = BestMs([&] {
      Sum<double, float, 2, false, true>(by_column.data(), n_rows, n_features, 1, nullptr, start,
                                         n_rows, stats.data(), hist.data());
    }, kPasses);
    const double words = BestMs([&] {
      Sum<double, float, 2, true, true>(interleaved.data(), n_rows, n_features, 1, nullptr, start,
                                        n_rows, stats.data(), hist.data());
    }, kPasses);
    printf("root, float: column-major %.2f ms, interleaved %.2f ms\n", column, words);
  }
  for (int n_nodes : {2, 8, 16, 32}) {
    std::vector<int32_t> node(n_rows);
    for (auto& k : node) k = rng() % n_nodes;
    std::vector<int32_t> rows;
    std::vector<int64_t> start(n_nodes + 1);
    for (int k = 0; k < n_nodes; ++k) {  // even nodes are the summed children
      start[k] = rows.size();
      if (k % 2) continue;
      for (int64_t r = 0; r < n_rows; ++r) {
        if (node[r] == k) rows.push_back(r);
      }
    }
    start[n_nodes] = rows.size();
    const int64_t n_list = rows.size();
    std::vector<float> floats(n_list * 2, 0.5f);
    std::vector<double> float_hist(n_features * n_nodes * kBins * 2);
    std::vector<int64_t> packed(n_list, 3), packed_hist(n_features * n_nodes * kBins);
    const auto sum = [&](auto kernel, const uint8_t* bins, const auto* stats, auto* hist) {
      return BestMs([&] {
        kernel(bins, n_rows, n_features, n_nodes, rows.data(), start.data(), n_list, stats, hist);
      }, kPasses);
    };
    const double fc = sum(Sum<double, float, 2, false, false>, by_column.data(), floats.data(),
                          float_hist.data());
    const double fi = sum(Sum<double, float, 2, true, false>, interleaved.data(), floats.data(),
                          float_hist.data());
    const double pc = sum(Sum<int64_t, int64_t, 1, false, false>, by_column.data(),
                          packed.data(), packed_hist.data());
    const double pi = sum(Sum<int64_t, int64_t, 1, true, false>, interleaved.data(),
                          packed.data(), packed_hist.data());
    printf("%2d nodes, node by node, ms: float column-major %.2f, interleaved %.2f | packed "
           "column-major %.2f, interleaved %.2f\n",
           n_nodes, fc, fi, pc, pi);
  }
  return 0;
}
