// The timing helper of the micro benchmarks in this folder (header only, so
// each stays one g++ command).
#pragma once

#include <algorithm>
#include <chrono>

// The fastest of `passes` runs of f(), in milliseconds; before() runs ahead
// of each, untimed.
template <typename F, typename Before>
double BestMs(F f, int passes, Before before) {
  double best = 1e30;
  for (int rep = 0; rep < passes; ++rep) {
    before();
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double, std::milli>(
                              std::chrono::steady_clock::now() - t0)
                              .count());
  }
  return best;
}

template <typename F>
double BestMs(F f, int passes) {
  return BestMs(f, passes, [] {});
}
