// The running sums over the value bins the split search takes, from a
// level's sums (histogram.cc: RunningSums, for a level summed afresh), and
// one parent's children from the parent's sums and one child's, the other
// child by subtraction (SubtractAndRun, for SumChildren).  Sums is
// histogram.cc's FloatSums or PackedSums.
//
// Both have two loops: one for kStored sums a slot known when compiled
// (kStored > 0, with at most 8 output columns), whose running sums are
// locals indexed by constants, which GCC keeps in registers, and one for any
// width.  The latter's indices into its running sums are known only when run
// (sums.Column), so they went through memory, every bin's adds waiting on a
// store and a load: on rank.train's 32-node level (6874 slots a node) that
// chain was most of the subtraction.  The fixed loops take Sums::Column(j,
// q) to be q * kStored + j (FloatSums: kParts 1; PackedSums: the gradients,
// then the hessians) and add in the same order: the same sums.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "hist_layout.h"

template <class Sums, int kStored>
constexpr bool kFixedWidth = kStored > 0 && kStored * Sums::kParts <= 8;

// One segment's running sums: c[b * step + column] from h's n_bins slots
// (n_stored sums each) as RunningSums says.
template <class Sums, int kStored>
void RunSegment(const typename Sums::Acc* __restrict h, float* __restrict c, int64_t n_bins,
                int64_t step, const Sums& sums) {
  using Acc = typename Sums::Acc;
  if constexpr (kFixedWidth<Sums, kStored>) {
    constexpr int kOut = kStored * Sums::kParts;
    Acc running[kOut];
    for (int column = 0; column < kOut; ++column) running[column] = Acc(0);
    for (int64_t b = 0; b < n_bins; ++b) {
      const bool value_bin = b + 1 < n_bins;
#pragma GCC unroll 8
      for (int j = 0; j < kStored; ++j) {
        Acc parts[Sums::kParts];
        sums.Split(h[b * kStored + j], parts);
#pragma GCC unroll 2
        for (int q = 0; q < Sums::kParts; ++q) {
          const int column = q * kStored + j;
          if (value_bin) running[column] += parts[q];
          c[b * step + column] = sums.Value(value_bin ? running[column] : parts[q], column);
        }
      }
    }
  } else {
    const int64_t n_stored = sums.n_stored;
    std::vector<Acc> running(n_stored * Sums::kParts, Acc(0));
    Acc parts[Sums::kParts];
    for (int64_t b = 0; b < n_bins; ++b) {
      const bool value_bin = b + 1 < n_bins;
      for (int64_t j = 0; j < n_stored; ++j) {
        sums.Split(h[b * n_stored + j], parts);
        for (int q = 0; q < Sums::kParts; ++q) {
          const int64_t column = sums.Column(j, q);
          if (value_bin) running[column] += parts[q];
          c[b * step + column] = sums.Value(value_bin ? running[column] : parts[q], column);
        }
      }
    }
  }
}

// cumulative[f][node][b] = sum of hist[f][node][0..b] for value bins, and
// the missing bin (the last) as it is; summed in Acc, then rounded to float.
// `hist` lies as `layout` says, `cumulative` as `running_layout` (its
// padding set to 0).  kStored: sums.n_stored, or 0 (any).
template <class Sums, int kStored>
void RunningSums(const typename Sums::Acc* hist, const HistLayout& layout,
                 const HistLayout& running_layout, const Sums& sums, float* cumulative) {
  const int64_t n_stored = sums.n_stored, n_out = n_stored * Sums::kParts;
  const int64_t step = running_layout.bin_stride * n_out;  // from a bin's running sums to the next
  running_layout.ZeroPadding(cumulative, n_out);
  layout.ForEachSegment([&](int64_t f, int64_t k) {
    RunSegment<Sums, kStored>(hist + layout.Segment(f, k) * n_stored,
                              cumulative + running_layout.Segment(f, k) * n_out, layout.Bins(f),
                              step, sums);
  });
}

// One parent's children: rest = from - part (exact in Acc), and both
// children's running sums over the value bins (float32; the missing bin,
// last, as it is), a bin's `step` floats after the one before.  kStored:
// sums.n_stored, or 0 (any).
template <class Sums, int kStored>
void SubtractAndRunAny(const typename Sums::Acc* from, const typename Sums::Acc* part,
                       typename Sums::Acc* rest, float* part_running, float* rest_running,
                       int64_t n_bins, int64_t step, const Sums& sums) {
  using Acc = typename Sums::Acc;
  const int64_t n_stored = kStored > 0 ? kStored : sums.n_stored;
  const int64_t n_out = n_stored * Sums::kParts;
  Acc narrow_part[8] = {0}, narrow_rest[8] = {0};
  std::vector<Acc> wide_part, wide_rest;
  Acc* run_part = narrow_part;
  Acc* run_rest = narrow_rest;
  if (n_out > 8) {
    wide_part.assign(n_out, Acc(0));
    wide_rest.assign(n_out, Acc(0));
    run_part = wide_part.data();
    run_rest = wide_rest.data();
  }
  Acc part_parts[Sums::kParts], rest_parts[Sums::kParts];
  for (int64_t b = 0; b < n_bins; ++b) {
    const bool value_bin = b + 1 < n_bins;
    for (int64_t j = 0; j < n_stored; ++j) {
      const int64_t at = b * n_stored + j;
      const Acc difference = from[at] - part[at];
      rest[at] = difference;
      sums.Split(part[at], part_parts);
      sums.Split(difference, rest_parts);
      for (int q = 0; q < Sums::kParts; ++q) {
        const int64_t column = sums.Column(j, q), out = b * step + column;
        if (value_bin) {
          run_part[column] += part_parts[q];
          run_rest[column] += rest_parts[q];
          part_running[out] = sums.Value(run_part[column], column);
          rest_running[out] = sums.Value(run_rest[column], column);
        } else {
          part_running[out] = sums.Value(part_parts[q], column);
          rest_running[out] = sums.Value(rest_parts[q], column);
        }
      }
    }
  }
}

// SubtractAndRunAny's sums, in its order, at a fixed width (above).
template <class Sums, int kStored>
void SubtractAndRunFixed(const typename Sums::Acc* __restrict from,
                         const typename Sums::Acc* __restrict part,
                         typename Sums::Acc* __restrict rest, float* __restrict part_running,
                         float* __restrict rest_running, int64_t n_bins, int64_t step,
                         const Sums& sums) {
  using Acc = typename Sums::Acc;
  constexpr int kOut = kStored * Sums::kParts;
  Acc run_part[kOut], run_rest[kOut];
  for (int c = 0; c < kOut; ++c) run_part[c] = run_rest[c] = Acc(0);
  for (int64_t b = 0; b + 1 < n_bins; ++b) {  // the value bins
#pragma GCC unroll 8
    for (int j = 0; j < kStored; ++j) {
      const int64_t at = b * kStored + j;
      const Acc difference = from[at] - part[at];
      rest[at] = difference;
      Acc part_parts[Sums::kParts], rest_parts[Sums::kParts];
      sums.Split(part[at], part_parts);
      sums.Split(difference, rest_parts);
#pragma GCC unroll 2
      for (int q = 0; q < Sums::kParts; ++q) {
        const int column = q * kStored + j;
        run_part[column] += part_parts[q];
        run_rest[column] += rest_parts[q];
        part_running[b * step + column] = sums.Value(run_part[column], column);
        rest_running[b * step + column] = sums.Value(run_rest[column], column);
      }
    }
  }
  const int64_t b = n_bins - 1;  // the missing bin, as it is
#pragma GCC unroll 8
  for (int j = 0; j < kStored; ++j) {
    const int64_t at = b * kStored + j;
    const Acc difference = from[at] - part[at];
    rest[at] = difference;
    Acc part_parts[Sums::kParts], rest_parts[Sums::kParts];
    sums.Split(part[at], part_parts);
    sums.Split(difference, rest_parts);
    for (int q = 0; q < Sums::kParts; ++q) {
      const int column = q * kStored + j;
      part_running[b * step + column] = sums.Value(part_parts[q], column);
      rest_running[b * step + column] = sums.Value(rest_parts[q], column);
    }
  }
}

template <class Sums, int kStored>
void SubtractAndRun(const typename Sums::Acc* from, const typename Sums::Acc* part,
                    typename Sums::Acc* rest, float* part_running, float* rest_running,
                    int64_t n_bins, int64_t step, const Sums& sums) {
  if constexpr (kFixedWidth<Sums, kStored>) {
    SubtractAndRunFixed<Sums, kStored>(from, part, rest, part_running, rest_running, n_bins,
                                       step, sums);
  } else {
    SubtractAndRunAny<Sums, kStored>(from, part, rest, part_running, rest_running, n_bins, step,
                                     sums);
  }
}
