// The levels of the native quantised kernel, alone and in parts: the root
// (SumLevel, every row in place), then jaxboost/native/histogram.cc's
// SumChildren on 500k rows x 28 features x 256 bins, the rows split at random
// over 2 to 32 nodes (so the summed, smaller children hold about half of the
// rows), and its steps apart: the count of rows per node (CountRows; in the
// library children levels up to 1024 nodes route and list in one pass,
// RouteAndList, and wider ones count as they route, RouteRows), the row list
// (ListRowsByGroup), the histogram pass (AccumulateEntries); "rest" is
// the subtraction and running sums.  Best of 11 passes each.  Built with
// -fPIC, as the library is: code generation differs (see AddEntries).
//
//   g++ -O3 -std=c++17 -fPIC -w -I "$(python -c 'import jax; print(jax.ffi.include_dir())')" \
//     benchmarks/micro/children_level.cc -o /tmp/children_level && /tmp/children_level
//
// Optional arguments: the row count (default 500000; a 1M-row fit on two
// devices has 507904 per device), and "cold" to write 64 MiB before each
// pass so that the bins and statistics come from memory, as in a fit.
#include "../../jaxboost/native/histogram.cc"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "best_ms.h"

int main(int argc, char** argv) {
  const int64_t n_rows = argc > 1 ? atoll(argv[1]) : 500000, n_features = 28, n_bins = 256;
  const bool cold = argc > 2 && strcmp(argv[2], "cold") == 0;
  std::vector<int64_t> evicted(cold ? 8 << 20 : 0);
  const auto evict = [&] {
    for (auto& v : evicted) v += 1;
  };
  std::mt19937 rng(0);
  std::vector<uint8_t> bins(n_features * n_rows);
  for (auto& v : bins) v = rng() % 255;
  std::vector<int64_t> packed(n_rows);  // gradient * 2^32 + hessian, small integers
  for (auto& v : packed) v = (int64_t(rng() % 5) << 32) + rng() % 5;
  const float scale[2] = {1.0f, 1.0f};
  const PackedSums sums{1, scale};
  constexpr int kPasses = 11;
  {  // the root level: every row, in place
    std::vector<int32_t> node(n_rows, 0);
    std::vector<int64_t> count(1, n_rows), hist(n_features * n_bins);
    std::vector<float> running(n_features * n_bins * 2);
    RowList<int64_t> list;
    const double root = BestMs(
        [&] {
          SumLevel<1, PackedSums>(bins.data(), n_features, n_rows, node.data(), packed.data(),
                                  count, 1, n_bins, sums, &list, hist.data(), running.data());
        },
        kPasses, evict);
    printf(" 1 node (the root), %lld rows summed: level %.2f ms\n",
           static_cast<long long>(n_rows), root);
  }
  for (int64_t n_parents : {1, 2, 4, 8, 16}) {
    const int64_t n_nodes = 2 * n_parents;
    std::vector<int32_t> node(n_rows);
    for (auto& k : node) k = rng() % n_nodes;
    std::vector<int64_t> count(n_nodes, 0);
    for (auto k : node) ++count[k];
    // the smaller child of every parent (the float kernels' choice; quantised
    // ones take the child of smaller hessian sum, which random rows make alike)
    const std::vector<uint8_t> summed = SmallerChildren(count, n_parents);
    std::vector<int64_t> parent(n_features * n_parents * n_bins, 0);
    std::vector<int64_t> hist(n_features * n_nodes * n_bins);
    std::vector<float> running(n_features * n_nodes * n_bins * 2);
    RowList<int64_t> list;
    const double level = BestMs(
        [&] {
          SumChildren<1, PackedSums>(bins.data(), n_features, n_rows, node.data(), packed.data(),
                                     count, summed, false, n_parents, n_bins, sums, &list,
                                     parent.data(), hist.data(), running.data());
        },
        kPasses, evict);
    const double counting = BestMs(
        [&] {
          std::vector<int64_t> c;
          if (!CountRows(node.data(), n_rows, n_nodes, &c) || c[0] == -1) printf(" ");
        },
        kPasses, evict);
    const double listing = BestMs(
        [&] {
          ListRowsByGroup<1>(node.data(), packed.data(), n_rows, 1, count, summed,
                          kGroupShift, n_bins, BinTiles(n_features, n_rows), &list);
        },
        kPasses, evict);
    const double pass = BestMs(
        [&] {
          AccumulateEntries<1>(bins.data(), n_rows, n_features, list, 1, n_bins, n_nodes,
                               hist.data());
        },
        kPasses, evict);
    printf("%2lld nodes, %lld rows summed: level %.2f ms (+ counting %.2f) | list %.2f, pass %.2f, "
           "rest %.2f\n",
           static_cast<long long>(n_nodes), static_cast<long long>(list.size), level, counting,
           listing, pass, level - listing - pass);
  }
  return 0;
}
