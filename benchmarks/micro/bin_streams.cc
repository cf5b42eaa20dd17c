// Four byte streams read side by side, as a histogram pass reads the bins of
// a block of four features: 28 features of n_rows bins, in tiles of 8192
// rows, each tile's features four at a time.  Column-major (every feature's
// rows contiguous, as jaxboost stores them) the four streams lie n_rows bytes
// apart; tiled (each tile's rows of every feature contiguous) 8192 bytes
// apart.  The caches are flushed before each pass (64 MiB written), so the
// bins come from memory as in a fit.  Best of 9 passes, ms per pass.
//
//   g++ -O2 benchmarks/micro/bin_streams.cc -o /tmp/bin_streams && \
//     /tmp/bin_streams 491520 499712 507904 516096 1015808
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "best_ms.h"

int main(int argc, char** argv) {
  const int64_t n_features = 28, tile = 8192;
  std::vector<int64_t> evicted(8 << 20);
  const auto evict = [&] {
    for (auto& v : evicted) v += 1;
  };
  uint64_t checksum = 0;
  for (int a = 1; a < argc; ++a) {
    const int64_t n_rows = atoll(argv[a]);
    std::vector<uint8_t> bins(n_features * n_rows);
    for (size_t i = 0; i < bins.size(); ++i) bins[i] = static_cast<uint8_t>(i * 7);
    const auto pass = [&](bool tiled) {
      for (int64_t t0 = 0; t0 < n_rows; t0 += tile) {
        const int64_t t1 = std::min(t0 + tile, n_rows), pitch = tiled ? t1 - t0 : n_rows;
        const uint8_t* base = tiled ? bins.data() + t0 * n_features - t0 : bins.data();
        for (int64_t f = 0; f + 4 <= n_features; f += 4) {
          const uint8_t* c0 = base + f * pitch;
          uint64_t x = 0;
          for (int64_t r = t0; r < t1; ++r) {
            x += c0[r] ^ c0[r + pitch] ^ c0[r + 2 * pitch] ^ c0[r + 3 * pitch];
          }
          checksum += x;
        }
      }
    };
    const double column_major = BestMs([&] { pass(false); }, 9, evict);
    const double tiled = BestMs([&] { pass(true); }, 9, evict);
    printf("%8lld rows (%5.1f x 8192): column-major %.2f ms, tiled %.2f ms\n",
           static_cast<long long>(n_rows), n_rows / 8192.0, column_major, tiled);
  }
  return checksum == 42 ? 1 : 0;  // keeps the reads
}
