// One parent's children histograms from the parent's sums and one child's
// (histogram.cc, SumChildren): the other child's sums by subtraction, and
// both children's running sums over the value bins, the split search's
// input.  Sums is histogram.cc's FloatSums or PackedSums.
#pragma once

#include <cstdint>
#include <vector>

// One parent's children: rest = from - part (exact in Acc), and both
// children's running sums over the value bins (float32; the missing bin,
// last, as it is), a bin's `step` floats after the one before.  kStored > 0:
// sums.n_stored, known when compiled (SubtractAndRunFixed).
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

// SubtractAndRunAny's sums, in its order, with kStored sums a slot known
// when compiled: the running sums are locals indexed by constants, which
// GCC keeps in registers.  SubtractAndRunAny's indices into its arrays are
// known only when run (sums.Column), so its running sums went through the
// stack, every bin's adds waiting on a store and a load: on rank.train's
// 32-node level (6874 slots a node) that chain was most of the subtraction.
// Sums::Column(j, q) must be q * kStored + j (FloatSums: kParts 1;
// PackedSums: gradients, then hessians).
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
  if constexpr (kStored > 0 && kStored * Sums::kParts <= 8) {
    SubtractAndRunFixed<Sums, kStored>(from, part, rest, part_running, rest_running, n_bins,
                                       step, sums);
  } else {
    SubtractAndRunAny<Sums, kStored>(from, part, rest, part_running, rest_running, n_bins, step,
                                     sums);
  }
}
