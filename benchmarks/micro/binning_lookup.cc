// The native binning kernel's two ways to a bin on 507904 rows x 28 features
// (a 1M-row fit's shard on two devices): jaxboost/native/binning.cc's lookup
// tables (BinBlock) against a binary search for every feature (SearchBlock),
// block by block as the kernel runs them, best of 7 passes each; the bins
// must agree.  Features: a third standard normal, a third lognormal (long
// right tails, as the benchmarks' |x| features), a third uniform, with
// edges at 254 quantiles of each, as fit_bin_edges places them.
//
//   g++ -O3 -std=c++17 -fPIC -w -I "$(python -c 'import jax; print(jax.ffi.include_dir())')" \
//     benchmarks/micro/binning_lookup.cc -o /tmp/binning_lookup && /tmp/binning_lookup
#include "../../jaxboost/native/binning.cc"

#include <cstdio>
#include <random>

#include "best_ms.h"

int main() {
  const int64_t n_rows = 507904, n_features = 28, max_bins = 255;
  std::mt19937 rng(0);
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> uniform;
  std::vector<float> x(n_rows * n_features);
  for (int64_t r = 0; r < n_rows; ++r) {
    for (int64_t f = 0; f < n_features; ++f) {
      const float z = normal(rng);
      x[r * n_features + f] = f % 3 == 0 ? z : f % 3 == 1 ? std::exp(z) : uniform(rng);
    }
  }
  // edges: 254 quantiles per feature, padded with +inf as the kernel pads them
  int64_t width = 1;
  while (width < max_bins) width *= 2;
  const int64_t pitch = width + kMaxCompares;
  std::vector<float> table(n_features * pitch, std::numeric_limits<float>::infinity());
  std::vector<EdgeLookup> lookups(n_features);
  std::vector<float> column(n_rows);
  for (int64_t f = 0; f < n_features; ++f) {
    for (int64_t r = 0; r < n_rows; ++r) column[r] = x[r * n_features + f];
    std::sort(column.begin(), column.end());
    for (int64_t b = 0; b + 1 < max_bins; ++b) {
      table[f * pitch + b] = column[(b + 1) * (n_rows - 1) / max_bins];
    }
    lookups[f] = BuildLookup(table.data() + f * pitch, max_bins - 1);
    printf("feature %2ld: %s\n", static_cast<long>(f),
           lookups[f].compares < 0 ? "binary search"
                                   : (std::to_string(lookups[f].start.size()) + " buckets, " +
                                      std::to_string(lookups[f].compares) + " compare(s)")
                                         .c_str());
  }
  std::vector<int32_t> searched(n_rows * n_features), looked_up(n_rows * n_features);
  const auto run = [&](bool lookup, std::vector<int32_t>& out) {
    float value[kBlockRows];
    for (int64_t first = 0; first < n_rows; first += kBlockRows) {
      const int64_t rows = std::min(kBlockRows, n_rows - first);
      for (int64_t f = 0; f < n_features; ++f) {
        for (int64_t r = 0; r < rows; ++r) value[r] = x[(first + r) * n_features + f];
        int32_t* below = out.data() + f * n_rows + first;
        const float* edge = table.data() + f * pitch;
        if (lookup) {
          BinBlock(lookups[f], edge, width, value, rows, below);
        } else {
          SearchBlock(edge, width, value, rows, below);
        }
      }
    }
  };
  const double search_ms = BestMs([&] { run(false, searched); }, 7);
  const double lookup_ms = BestMs([&] { run(true, looked_up); }, 7);
  printf("binary search %.2f ms, lookup tables %.2f ms (%.2fx), bins %s\n", search_ms, lookup_ms,
         search_ms / lookup_ms, searched == looked_up ? "equal" : "DIFFER");
  return searched == looked_up ? 0 : 1;
}
