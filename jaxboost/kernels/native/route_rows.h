// Routing rows one level down a tree: the loop shared by the routing kernel
// (route.cc) and the children histogram kernels (histogram.cc), which route a
// level's rows and count the rows of every child in one pass before summing
// the children.  The plain reference is jaxboost.tree.route_rows.
//
// Row r at node k goes to 2 k + right, where right is 1 when its bin of the
// node's feature is the missing bin and the node sends missing values right,
// or when it is a value bin above the node's threshold bin; at a categorical
// node (a non-empty category set: jaxboost.engine.categorical) when it is a
// value bin outside the set.
#pragma once

#include <cstdint>
#include <vector>

#include "bin_tiles.h"

// The splits of a level's n_nodes nodes, as the routing loop reads them.
struct LevelSplits {
  std::vector<int64_t> feature;
  std::vector<int32_t> threshold;
  std::vector<int32_t> missing_right;

  // false when a feature is outside [0, n_features)
  bool Read(const int32_t* feature_of_node, const int32_t* threshold_bin, const bool* missing_left,
            int64_t n_nodes, int64_t n_features) {
    feature.resize(n_nodes);
    threshold.resize(n_nodes);
    missing_right.resize(n_nodes);
    for (int64_t k = 0; k < n_nodes; ++k) {
      const int32_t f = feature_of_node[k];
      if (f < 0 || f >= n_features) return false;
      feature[k] = f;
      threshold[k] = threshold_bin[k];
      missing_right[k] = missing_left[k] ? 0 : 1;
    }
    return true;
  }

  // With category sets (ReadSets): every node's child of every bin,
  // right_of_bin[256 k + bin], one load per row in place of the tests.
  bool has_sets = false;
  std::vector<uint32_t> category_left;  // (n_nodes, 8): bit b % 32 of word b / 32
  std::vector<uint8_t> categorical;     // (n_nodes,): the node's set is not empty
  std::vector<uint8_t> right_of_bin;

  // `sets`: n_words = 8 n_nodes words, the bins each node sends left (all
  // zero at a numeric node), or n_words = 0 without categorical features.
  // Call after Read.  false when n_words is neither.
  bool ReadSets(const uint32_t* sets, int64_t n_words, int64_t missing_bin) {
    const int64_t n = n_nodes();
    if (n_words == 0) return true;
    if (n_words != kSetWords * n) return false;
    category_left.assign(sets, sets + n_words);
    categorical.assign(n, 0);
    for (int64_t k = 0; k < n; ++k) {
      for (int64_t w = 0; w < kSetWords; ++w) categorical[k] |= sets[kSetWords * k + w] != 0;
      has_sets = has_sets || categorical[k];
    }
    if (!has_sets) return true;  // no categorical split in this level: the tests
    right_of_bin.resize(kBinsOfSets * n);
    for (int64_t k = 0; k < n; ++k) {
      for (int32_t b = 0; b < kBinsOfSets; ++b) {
        right_of_bin[kBinsOfSets * k + b] =
            b == missing_bin ? missing_right[k] : ValueRight(k, b);
      }
    }
    return true;
  }

  // 1 when value bin b (not the missing bin) goes right at node k.
  int32_t ValueRight(int64_t k, int32_t b) const {
    if (has_sets && categorical[k]) {
      return static_cast<int32_t>(((category_left[kSetWords * k + (b >> 5)] >> (b & 31)) & 1) == 0);
    }
    return static_cast<int32_t>(b > threshold[k]);
  }

  int64_t n_nodes() const { return static_cast<int64_t>(feature.size()); }

  static constexpr int64_t kSetWords = 8;     // 256 bins in 32-bit words
  static constexpr int32_t kBinsOfSets = 256;  // every uint8 bin
};

// next[r] = 2 node[r] + right for every row of the tiled `bins`, tile by
// tile in order, each tile followed by after_tile(t0, t1) (its rows [t0, t1),
// whose next is then written and in cache).  false when a node is outside
// [0, n_nodes) (the row is then routed as if at node 0).  kSets: the level
// has categorical splits, every row reads right_of_bin.
template <bool kSets, typename AfterTile>
bool RouteTilesOf(const uint8_t* bins, const BinTiles& tiles, const int32_t* node,
                  const LevelSplits& splits, int64_t missing_bin, int32_t* next,
                  AfterTile& after_tile) {
  const int64_t n_nodes = splits.n_nodes();
  std::vector<int64_t> column(n_nodes);  // the node's feature times the tile's pitch
  const uint8_t* right_of_bin = kSets ? splits.right_of_bin.data() : nullptr;
  int32_t out_of_range = 0;
  int64_t pitch = 0;
  tiles.ForEachTile([&](int64_t t0, int64_t t1, int64_t shift) {
    if (t1 - t0 != pitch) {  // the first tile, and a shorter last one
      pitch = t1 - t0;
      for (int64_t k = 0; k < n_nodes; ++k) column[k] = splits.feature[k] * pitch;
    }
    // the node's feature's bin of row r in [t0, t1) is tile[column + r]
    const uint8_t* tile = bins + shift;
    for (int64_t r = t0; r < t1; ++r) {
      const int32_t k = node[r];
      const bool bad = k < 0 || k >= n_nodes;
      out_of_range |= static_cast<int32_t>(bad);
      const int32_t safe = bad ? 0 : k;
      const int32_t bin = tile[column[safe] + r];
      int32_t right;
      if constexpr (kSets) {
        right = right_of_bin[LevelSplits::kBinsOfSets * safe + bin];
      } else {
        right = bin == missing_bin ? splits.missing_right[safe]
                                   : static_cast<int32_t>(bin > splits.threshold[safe]);
      }
      next[r] = 2 * safe + right;
    }
    after_tile(t0, t1);
  });
  return out_of_range == 0;
}

template <typename AfterTile>
bool RouteTiles(const uint8_t* bins, const BinTiles& tiles, const int32_t* node,
                const LevelSplits& splits, int64_t missing_bin, int32_t* next,
                AfterTile&& after_tile) {
  if (splits.has_sets) {
    return RouteTilesOf<true>(bins, tiles, node, splits, missing_bin, next, after_tile);
  }
  return RouteTilesOf<false>(bins, tiles, node, splits, missing_bin, next, after_tile);
}

// RouteTiles; with kCount, count[j] (2 n_nodes entries) = the rows sent
// to node j of the next level.
template <bool kCount>
bool RouteRows(const uint8_t* bins, const BinTiles& tiles, const int32_t* node,
               const LevelSplits& splits, int64_t missing_bin, int32_t* next,
               std::vector<int64_t>* count) {
  if constexpr (!kCount) {
    return RouteTiles(bins, tiles, node, splits, missing_bin, next, [](int64_t, int64_t) {});
  } else {
    const int64_t n_next = 2 * splits.n_nodes();
    // four interleaved tallies: consecutive rows sent to one node do not each
    // wait for the previous increment's store
    constexpr int kTallies = 4;
    std::vector<int64_t> tally(kTallies * n_next, 0);
    const bool in_range =
        RouteTiles(bins, tiles, node, splits, missing_bin, next, [&](int64_t t0, int64_t t1) {
          for (int64_t r = t0; r < t1; ++r) ++tally[(r & (kTallies - 1)) * n_next + next[r]];
        });
    count->assign(n_next, 0);
    for (int q = 0; q < kTallies; ++q) {
      for (int64_t j = 0; j < n_next; ++j) (*count)[j] += tally[q * n_next + j];
    }
    return in_range;
  }
}
