// Histogram accumulators compared: the inner loop of the native root pass
// (jaxboost/native/histogram.cc: feature-major uint8 bins, 4 features per
// pass, tiles of 8192 rows) over 500k rows x 28 features x 256 bins, with
// (gradient, hessian) as two floats summed into doubles (what the kernel
// does), into floats, as int32 pairs, or quantised and packed into one
// integer (gradient in the high half, hessian in the low half), one add per
// update, as LightGBM 4's quantised training does; and the two floats
// converted and added to their double sums as one SSE2 pair, as the kernel
// now does (EntryStats).  Best of 7 passes.
//
//   g++ -O3 -std=c++17 benchmarks/micro/histogram_accumulators.cc -o /tmp/acc && /tmp/acc
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>
#include <cstring>
#include <emmintrin.h>
// root-style pass: feature-major bins, 4 features per pass, tiles of 8192 rows
constexpr int kTile = 8192;
template <typename Acc, typename Stat, int kStats>
double run(const std::vector<uint8_t>& bins, const std::vector<Stat>& stats, int n_rows, int n_feat, int reps) {
  std::vector<Acc> hist(size_t(n_feat) * 256 * kStats);
  double best = 1e9;
  for (int rep = 0; rep < reps; ++rep) {
    std::fill(hist.begin(), hist.end(), Acc(0));
    auto t0 = std::chrono::steady_clock::now();
    for (int r0 = 0; r0 < n_rows; r0 += kTile) {
      int r1 = std::min(r0 + kTile, n_rows);
      for (int f = 0; f < n_feat; f += 4) {
        const uint8_t* b[4]; Acc* h[4];
        for (int k = 0; k < 4; ++k) { b[k] = bins.data() + size_t(f + k) * n_rows; h[k] = hist.data() + size_t(f + k) * 256 * kStats; }
        for (int r = r0; r < r1; ++r) {
          const Stat* s = stats.data() + size_t(r) * kStats;
          for (int k = 0; k < 4; ++k) {
            Acc* p = h[k] + b[k][r] * kStats;
            for (int j = 0; j < kStats; ++j) p[j] += s[j];
          }
        }
      }
    }
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, dt);
  }
  volatile Acc sink = hist[7]; (void)sink;
  return best * 1e3;
}
// float (gradient, hessian) pairs into double sums as one SSE2 conversion and
// one add per feature
double run_pairs(const std::vector<uint8_t>& bins, const std::vector<float>& stats, int n_rows,
                 int n_feat, int reps) {
  std::vector<double> hist(size_t(n_feat) * 256 * 2);
  double best = 1e9;
  for (int rep = 0; rep < reps; ++rep) {
    std::fill(hist.begin(), hist.end(), 0.0);
    auto t0 = std::chrono::steady_clock::now();
    for (int r0 = 0; r0 < n_rows; r0 += kTile) {
      int r1 = std::min(r0 + kTile, n_rows);
      for (int f = 0; f < n_feat; f += 4) {
        const uint8_t* b[4]; double* h[4];
        for (int k = 0; k < 4; ++k) { b[k] = bins.data() + size_t(f + k) * n_rows; h[k] = hist.data() + size_t(f + k) * 256 * 2; }
        for (int r = r0; r < r1; ++r) {
          const __m128d pair = _mm_cvtps_pd(_mm_castsi128_ps(
              _mm_loadl_epi64(reinterpret_cast<const __m128i*>(stats.data() + size_t(r) * 2))));
          for (int k = 0; k < 4; ++k) {
            double* p = h[k] + b[k][r] * 2;
            _mm_storeu_pd(p, _mm_add_pd(_mm_loadu_pd(p), pair));
          }
        }
      }
    }
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, dt);
  }
  volatile double sink = hist[7]; (void)sink;
  return best * 1e3;
}
int main() {
  const int n_rows = 500000, n_feat = 28;
  std::mt19937 rng(0);
  std::vector<uint8_t> bins(size_t(n_rows) * n_feat);
  for (auto& v : bins) v = rng() % 255;
  std::vector<float> fstats(size_t(n_rows) * 2);
  for (auto& v : fstats) v = (rng() % 1000) / 1000.0f;
  std::vector<int32_t> istats(size_t(n_rows) * 2);
  for (auto& v : istats) v = rng() % 255;
  std::vector<int64_t> packed(n_rows);
  for (int r = 0; r < n_rows; ++r) packed[r] = (int64_t(istats[2*r]) << 32) + istats[2*r+1];
  std::vector<int16_t> s16(size_t(n_rows) * 2);
  for (auto& v : s16) v = rng() % 127;
  std::vector<int32_t> packed32(n_rows);
  for (int r = 0; r < n_rows; ++r) packed32[r] = (int32_t(s16[2*r]) << 16) + s16[2*r+1];
  printf("float stats -> double acc, one by one: %.2f ms\n", run<double, float, 2>(bins, fstats, n_rows, n_feat, 7));
  printf("float pairs -> double acc (SSE2):    %.2f ms\n", run_pairs(bins, fstats, n_rows, n_feat, 7));
  printf("float stats -> float acc:            %.2f ms\n", run<float, float, 2>(bins, fstats, n_rows, n_feat, 7));
  printf("int32 stats -> int32 acc pairs:      %.2f ms\n", run<int32_t, int32_t, 2>(bins, istats, n_rows, n_feat, 7));
  printf("packed int64 (g<<32|h) -> int64 acc: %.2f ms\n", run<int64_t, int64_t, 1>(bins, packed, n_rows, n_feat, 7));
  printf("packed int32 (g<<16|h) -> int32 acc: %.2f ms\n", run<int32_t, int32_t, 1>(bins, packed32, n_rows, n_feat, 7));
}
