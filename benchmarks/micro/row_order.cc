// A level below the root, alone: the smaller children's rows (a random half
// of 500k rows, 28 features, 256 bins) summed from a row list grouped node by
// node (what the native kernel does for float statistics), in row order with
// each entry's node, or by groups of 4 or 8 consecutive nodes, in row order
// within a group (what it does for quantised, packed statistics: groups of
// 8), for float (gradient, hessian) pairs summed into doubles and for packed
// int64 words.  Also the bins' gather alone and the histogram updates alone
// (at sequential, fake bins), which show what bounds the pass node by node.
// Best of 5 passes each.
//
//   g++ -O3 -std=c++17 benchmarks/micro/row_order.cc -o /tmp/row_order && /tmp/row_order
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "best_ms.h"

constexpr int64_t kTile = 8192;
constexpr int kBins = 256;

struct Level {
  int64_t n_rows;
  int n_features, n_nodes;
  std::vector<uint8_t> bins;           // (n_features, n_rows)
  std::vector<int32_t> grouped_rows;   // the even nodes' rows, node by node
  std::vector<int64_t> start;          // node k's entries: [start[k], start[k + 1])
  std::vector<int32_t> ordered_rows;   // the same rows in row order
  std::vector<int32_t> ordered_node;   // and their nodes
};

// The listed rows by groups of 2^shift nodes, in row order within a group
// (shift 5 or more: row order).
void ListByGroups(Level* l, const std::vector<int32_t>& node, int shift) {
  l->ordered_rows.clear();
  l->ordered_node.clear();
  for (int group = 0; group <= (l->n_nodes - 1) >> shift; ++group) {
    for (int64_t r = 0; r < l->n_rows; ++r) {
      if (node[r] % 2 == 0 && node[r] >> shift == group) {
        l->ordered_rows.push_back(r);
        l->ordered_node.push_back(node[r]);
      }
    }
  }
}

// kMode 0: histogram updates; 1: the bins' gather only; 2: updates only
template <typename Acc, typename Stat, int kStats, int kMode>
void Grouped(const Level& l, const Stat* stats, Acc* hist, int64_t* sink) {
  const int64_t n_list = l.grouped_rows.size();
  for (int64_t t0 = 0; t0 < n_list; t0 += kTile) {
    const int64_t t1 = std::min(t0 + kTile, n_list);
    for (int f = 0; f < l.n_features; f += 4) {
      const uint8_t* b[4];
      for (int k = 0; k < 4; ++k) b[k] = l.bins.data() + (f + k) * l.n_rows;
      int node = 0;
      for (int64_t i = t0; i < t1; ++i) {
        while (l.start[node + 1] <= i) ++node;
        const int64_t r = l.grouped_rows[i];
        const Stat* s = stats + i * kStats;
        for (int k = 0; k < 4; ++k) {
          const int64_t bin = kMode == 2 ? (i * 7 + k) & (kBins - 1) : b[k][r];
          if (kMode == 1) {
            *sink += bin;
            continue;
          }
          Acc* p = hist + (((f + k) * l.n_nodes + node) * kBins + bin) * kStats;
          for (int j = 0; j < kStats; ++j) p[j] += s[j];
        }
      }
    }
  }
}

template <typename Acc, typename Stat, int kStats>
void Ordered(const Level& l, const Stat* stats, Acc* hist) {
  const int64_t n_list = l.ordered_rows.size();
  for (int64_t t0 = 0; t0 < n_list; t0 += kTile) {
    const int64_t t1 = std::min(t0 + kTile, n_list);
    for (int f = 0; f < l.n_features; f += 4) {
      const uint8_t* b[4];
      Acc* h[4];
      for (int k = 0; k < 4; ++k) {
        b[k] = l.bins.data() + (f + k) * l.n_rows;
        h[k] = hist + (f + k) * l.n_nodes * kBins * kStats;
      }
      for (int64_t i = t0; i < t1; ++i) {
        const int64_t r = l.ordered_rows[i], at = l.ordered_node[i] * kBins * kStats;
        const Stat* s = stats + i * kStats;
        for (int k = 0; k < 4; ++k) {
          Acc* p = h[k] + at + b[k][r] * kStats;
          for (int j = 0; j < kStats; ++j) p[j] += s[j];
        }
      }
    }
  }
}

constexpr int kPasses = 5;

int main() {
  std::mt19937 rng(0);
  for (int n_nodes : {2, 8, 16, 32}) {
    Level l{500000, 28, n_nodes, {}, {}, std::vector<int64_t>(n_nodes + 1, 0), {}, {}};
    l.bins.resize(l.n_features * l.n_rows);
    for (auto& b : l.bins) b = rng() % 255;
    std::vector<int32_t> node(l.n_rows);
    for (auto& k : node) k = rng() % n_nodes;
    for (int k = 0; k < n_nodes; ++k) {  // even nodes are the summed children
      l.start[k] = l.grouped_rows.size();
      if (k % 2) continue;
      for (int64_t r = 0; r < l.n_rows; ++r) {
        if (node[r] == k) l.grouped_rows.push_back(r);
      }
    }
    l.start[n_nodes] = l.grouped_rows.size();
    const int64_t n_list = l.grouped_rows.size();
    std::vector<float> floats(n_list * 2, 0.5f);
    std::vector<int64_t> packed(n_list, (int64_t{-1} << 32) + 3);
    std::vector<double> float_hist(l.n_features * n_nodes * kBins * 2);
    std::vector<int64_t> packed_hist(l.n_features * n_nodes * kBins);
    int64_t sink = 0;
    const double fg = BestMs([&] { Grouped<double, float, 2, 0>(l, floats.data(), float_hist.data(), &sink); }, kPasses);
    const double pg = BestMs([&] { Grouped<int64_t, int64_t, 1, 0>(l, packed.data(), packed_hist.data(), &sink); }, kPasses);
    double fo[3], po[3];  // row order, groups of 4 nodes, groups of 8
    const int shifts[3] = {30, 2, 3};
    for (int s = 0; s < 3; ++s) {
      ListByGroups(&l, node, shifts[s]);
      fo[s] = BestMs([&] { Ordered<double, float, 2>(l, floats.data(), float_hist.data()); }, kPasses);
      po[s] = BestMs([&] { Ordered<int64_t, int64_t, 1>(l, packed.data(), packed_hist.data()); }, kPasses);
    }
    const double gather = BestMs([&] { Grouped<double, float, 2, 1>(l, floats.data(), float_hist.data(), &sink); }, kPasses);
    const double updates = BestMs([&] { Grouped<double, float, 2, 2>(l, floats.data(), float_hist.data(), &sink); }, kPasses);
    printf("%2d nodes, %lld rows listed, ms | node by node: float %.2f, packed %.2f | row order: "
           "float %.2f, packed %.2f | groups of 4 nodes: float %.2f, packed %.2f | groups of 8: "
           "float %.2f, packed %.2f | node by node, float: gather only %.2f, updates only %.2f\n",
           n_nodes, static_cast<long long>(n_list), fg, pg, fo[0], po[0], fo[1], po[1], fo[2], po[2],
           gather, updates);
    if (sink == 42) printf(" ");  // keeps the gather-only pass from being optimised away
  }
  return 0;
}
