// How the native kernels store a shard's bins: the (n_features, n_rows) uint8
// array by tiles of kBinTileRows (T) rows.  Tile t holds rows [t T, t T +
// pitch) of every feature, one feature after another, where pitch is T, or
// the rows left in the last tile.  So the bin of (feature f, row r) is at
//
//   (r / T) * n_features * T + f * pitch(r) + r % T
//
// and with at most T rows the layout is plain column-major.  The reference
// is jaxboost.binning.tile_bins.
//
// Why tiles: a histogram pass reads the bins of four features at once.
// Column-major, those four streams lie n_rows bytes apart, and at some row
// counts they conflict in the memory system: a plain read of them
// (benchmarks/micro/bin_streams.cc) took 1.6x to 1.8x as long at 507904 rows
// (a 1M-row fit's shard on two devices) as at 499712 or 516096, and 2.1x at
// 1015808 (on one device).  Within a tile they are T bytes apart whatever the
// row count.  Tiles of 32768 rows read as fast as column-major at the other
// row counts; with tiles of 8192 each feature's stream restarted every 8 KiB
// and the passes were about 5% slower.
#pragma once

#include <cstdint>

constexpr int kBinTileShift = 15;
constexpr int64_t kBinTileRows = int64_t{1} << kBinTileShift;

struct BinTiles {
  int64_t n_features;
  int64_t last_start;  // the first row of the last tile
  int64_t last_pitch;  // its rows

  BinTiles(int64_t n_features, int64_t n_rows)
      : n_features(n_features),
        last_start(n_rows > 0 ? ((n_rows - 1) >> kBinTileShift) << kBinTileShift : 0),
        last_pitch(n_rows - last_start) {}

  // bytes from one feature's bin of row r to the next feature's
  int64_t Pitch(int64_t r) const { return r >= last_start ? last_pitch : kBinTileRows; }

  // where feature 0's bin of row r is
  int64_t Start(int64_t r) const {
    return (r >> kBinTileShift) * n_features * kBinTileRows + (r & (kBinTileRows - 1));
  }

  int64_t At(int64_t f, int64_t r) const { return Start(r) + f * Pitch(r); }

  // body(t0, t1, shift) for every tile, rows [t0, t1): Start(r) = r + shift
  template <typename Body>
  void ForEachTile(Body&& body) const {
    const int64_t n_rows = last_start + last_pitch;
    for (int64_t t0 = 0; t0 < n_rows; t0 += kBinTileRows) {
      body(t0, t0 + Pitch(t0), Start(t0) - t0);
    }
  }
};
