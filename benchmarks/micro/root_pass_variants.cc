// The root pass of the quantised kernel (packed int64 statistics, 500k rows
// x 28 features x 256 bins, feature-major uint8 bins, tiles of 8192 rows)
// with other loop shapes: blocks of 2, 4 (the kernel), 7 or 14 features per
// pass over a tile; 4 features with the bins of 8 rows read as one 64-bit
// word; and 4 features with two histogram copies (even and odd rows, summed
// after), which would break store-to-load chains on repeated bins.  Each
// result is checked against the 4-feature pass.  Best of 9 passes, twice.
//
//   g++ -O3 -std=c++17 benchmarks/micro/root_pass_variants.cc -o /tmp/root_pass && /tmp/root_pass
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "best_ms.h"

constexpr int kTile = 8192;
using Acc = int64_t;

template <int kBlock>
void Blocks(const uint8_t* bins, const int64_t* stats, int n_rows, int n_features, Acc* hist) {
  for (int r0 = 0; r0 < n_rows; r0 += kTile) {
    const int r1 = std::min(r0 + kTile, n_rows);
    int f = 0;
    for (; f + kBlock <= n_features; f += kBlock) {
      const uint8_t* b[kBlock];
      Acc* h[kBlock];
      for (int k = 0; k < kBlock; ++k) {
        b[k] = bins + size_t(f + k) * n_rows;
        h[k] = hist + size_t(f + k) * 256;
      }
      for (int r = r0; r < r1; ++r) {
        const int64_t s = stats[r];
        for (int k = 0; k < kBlock; ++k) h[k][b[k][r]] += s;
      }
    }
    for (; f < n_features; ++f) {
      const uint8_t* b = bins + size_t(f) * n_rows;
      Acc* h = hist + size_t(f) * 256;
      for (int r = r0; r < r1; ++r) h[b[r]] += stats[r];
    }
  }
}

void Words(const uint8_t* bins, const int64_t* stats, int n_rows, int n_features, Acc* hist) {
  for (int r0 = 0; r0 < n_rows; r0 += kTile) {
    const int r1 = std::min(r0 + kTile, n_rows);
    for (int f = 0; f < n_features; f += 4) {
      const uint8_t* b[4];
      Acc* h[4];
      for (int k = 0; k < 4; ++k) {
        b[k] = bins + size_t(f + k) * n_rows;
        h[k] = hist + size_t(f + k) * 256;
      }
      int r = r0;
      for (; r + 8 <= r1; r += 8) {
        uint64_t word[4];
        for (int k = 0; k < 4; ++k) std::memcpy(&word[k], b[k] + r, 8);
        for (int q = 0; q < 8; ++q) {
          const int64_t s = stats[r + q];
          for (int k = 0; k < 4; ++k) h[k][(word[k] >> (8 * q)) & 255] += s;
        }
      }
      for (; r < r1; ++r) {
        for (int k = 0; k < 4; ++k) h[k][b[k][r]] += stats[r];
      }
    }
  }
}

void Copies(const uint8_t* bins, const int64_t* stats, int n_rows, int n_features, Acc* hist,
            Acc* second) {
  for (int r0 = 0; r0 < n_rows; r0 += kTile) {
    const int r1 = std::min(r0 + kTile, n_rows);
    for (int f = 0; f < n_features; f += 4) {
      const uint8_t* b[4];
      Acc* h[4];
      Acc* g[4];
      for (int k = 0; k < 4; ++k) {
        b[k] = bins + size_t(f + k) * n_rows;
        h[k] = hist + size_t(f + k) * 256;
        g[k] = second + size_t(f + k) * 256;
      }
      int r = r0;
      for (; r + 2 <= r1; r += 2) {
        for (int k = 0; k < 4; ++k) {
          h[k][b[k][r]] += stats[r];
          g[k][b[k][r + 1]] += stats[r + 1];
        }
      }
      for (; r < r1; ++r) {
        for (int k = 0; k < 4; ++k) h[k][b[k][r]] += stats[r];
      }
    }
  }
  for (int i = 0; i < n_features * 256; ++i) hist[i] += second[i];
}

int main() {
  const int n_rows = 500000, n_features = 28;
  std::mt19937 rng(0);
  std::vector<uint8_t> bins(size_t(n_rows) * n_features);
  for (auto& v : bins) v = rng() % 255;
  std::vector<int64_t> stats(n_rows);
  for (auto& v : stats) v = (int64_t(rng() % 5) << 32) + rng() % 5;
  std::vector<Acc> hist(n_features * 256), second(n_features * 256), reference(n_features * 256);
  Blocks<4>(bins.data(), stats.data(), n_rows, n_features, reference.data());
  auto timed = [&](const char* name, auto pass) {
    const double ms = BestMs(
        [&] {
          std::fill(hist.begin(), hist.end(), 0);
          std::fill(second.begin(), second.end(), 0);
          pass();
        },
        9);
    printf("%-22s %.2f ms%s\n", name, ms, hist == reference ? "" : "  (WRONG SUMS)");
  };
  const uint8_t* b = bins.data();
  const int64_t* s = stats.data();
  for (int run = 0; run < 2; ++run) {
    timed("2 features per pass", [&] { Blocks<2>(b, s, n_rows, n_features, hist.data()); });
    timed("4 (the kernel)", [&] { Blocks<4>(b, s, n_rows, n_features, hist.data()); });
    timed("7", [&] { Blocks<7>(b, s, n_rows, n_features, hist.data()); });
    timed("14", [&] { Blocks<14>(b, s, n_rows, n_features, hist.data()); });
    timed("4, 8 bins per load", [&] { Words(b, s, n_rows, n_features, hist.data()); });
    timed("4, two copies", [&] { Copies(b, s, n_rows, n_features, hist.data(), second.data()); });
  }
  return 0;
}
