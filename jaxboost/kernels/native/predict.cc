// Forest prediction for jaxboost on CPU, called from XLA through its FFI.
// Built with histogram.cc by jaxboost/native_library.py; the plain reference
// it must equal is jaxboost/predict.py (leaf_of_rows, predict_forest).
//
// Trees are complete and in heap order (node i has children 2i+1, 2i+2; the
// 2^D - 1 internal nodes first): x <= threshold goes left, NaN goes left
// where missing_left; at a categorical node (a non-empty category set) the
// code x (clamped to [0, 255], truncated) goes left when it is in the set.
// Rows are walked in blocks, one level of every row of the block at a time,
// so the block's walks are independent and overlap.  A tree with far fewer
// splitting nodes than its heap (a leaf-wise tree in a deep heap) is first
// compacted into a small table of the splitting nodes reachable from the
// root and its leaves, walked for the tree's real depth: a node that does
// not split sends every row left, so a chain of them is skipped to the first
// splitting node or leaf below on its left, the leaf the heap walk reaches.
//
// Shapes (row-major):
//   X             (n_rows, n_features) float32, NaN for missing
//   feature       (n_trees, 2^D - 1) int32
//   threshold     (n_trees, 2^D - 1) float32
//   missing_left  (n_trees, 2^D - 1) bool
//   leaf_value    (n_trees, 2^D, n_outputs) float32
//   category_left (n_trees, 2^D - 1, 8) uint32: bit c % 32 of word c / 32
//                 sends code c left, all zero at numeric nodes; or (0,)
//                 without categorical features
//   result        (n_rows, n_outputs) float32: the sum over trees

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

constexpr int64_t kBlockRows = 64;
constexpr int64_t kSetWords = 8;  // 256 codes in 32-bit words

// A tree's nodes as the walk reads them.
struct TreeNodes {
  const int32_t* feature;
  const float* threshold;
  const bool* missing_left;
  const uint32_t* sets;        // (n_internal, 8), or null without sets
  const uint8_t* categorical;  // (n_internal,): the node's set is not empty
};

// 1 when value v (not NaN) goes right at node k of a tree.
template <bool kSets>
inline int32_t ValueRight(const TreeNodes& tree, int32_t k, float v) {
  if constexpr (kSets) {
    if (tree.categorical[k]) {
      const int32_t code = static_cast<int32_t>(std::min(std::max(v, 0.0f), 255.0f));
      const uint32_t word = tree.sets[kSetWords * k + (code >> 5)];
      return static_cast<int32_t>(((word >> (code & 31)) & 1) == 0);
    }
  }
  return static_cast<int32_t>(v > tree.threshold[k]);
}

// node[i] = the leaf (heap index) of each of the block's rows.
template <bool kSets>
void WalkBlock(const float* block, int64_t rows, int64_t n_features, int depth,
               const TreeNodes& tree, int32_t* node) {
  std::fill(node, node + rows, 0);
  for (int level = 0; level < depth; ++level) {
    for (int64_t i = 0; i < rows; ++i) {
      const int32_t k = node[i];
      const float v = block[i * n_features + tree.feature[k]];
      const int32_t right = std::isnan(v) ? !tree.missing_left[k] : ValueRight<kSets>(tree, k, v);
      node[i] = 2 * k + 1 + right;
    }
  }
}

// A tree's node that does not split: every row goes left (threshold +inf or
// NaN, NaN left, no category set), as the heap walk reads it.
inline bool SendsAllLeft(const TreeNodes& tree, int64_t k) {
  const float t = tree.threshold[k];
  const bool categorical = tree.categorical != nullptr && tree.categorical[k];
  return tree.missing_left[k] && !categorical && !(t < std::numeric_limits<float>::infinity());
}

// An entry of a compacted tree: a splitting node, its children the entries
// left and left + 1; or a leaf, which sends every row left to itself (so rows
// that reach a leaf early stay there with no branch).
struct CompactNode {
  uint32_t feature;  // the feature, kMissingRight and kCategorical or'ed in
  float threshold;
  int32_t left;
};
constexpr uint32_t kMissingRight = 1u << 31;
constexpr uint32_t kCategorical = 1u << 30;
constexpr uint32_t kFeatureBits = kCategorical - 1;

// A compacted tree: its nodes, each leaf entry's leaf (position among the
// heap's leaves, -1 at splitting nodes), each node's category set (8 words,
// with sets only) and the longest root-to-leaf path of splitting nodes.
struct CompactTree {
  std::vector<CompactNode> nodes;
  std::vector<int32_t> leaf;
  std::vector<uint32_t> sets;
  int depth = 0;
};

// The heap node or leaf a row at heap node k reaches by the left children of
// nodes that do not split.
inline int64_t FirstSplitBelow(const TreeNodes& tree, int64_t n_internal, int64_t k) {
  while (k < n_internal && SendsAllLeft(tree, k)) k = 2 * k + 1;
  return k;
}

// The tree compacted in breadth-first order (entry 0 the root's).
CompactTree Compact(const TreeNodes& tree, int64_t n_internal) {
  CompactTree out;
  std::vector<int64_t> heap{FirstSplitBelow(tree, n_internal, 0)};
  std::vector<int> level{0};
  for (size_t e = 0; e < heap.size(); ++e) {
    const int64_t k = heap[e];
    const int32_t self = static_cast<int32_t>(e);
    if (k >= n_internal) {
      out.nodes.push_back({0, std::numeric_limits<float>::infinity(), self});
      out.leaf.push_back(static_cast<int32_t>(k - n_internal));
      if (tree.sets) out.sets.insert(out.sets.end(), kSetWords, 0);
      continue;
    }
    const int32_t left = static_cast<int32_t>(heap.size());
    uint32_t feature = static_cast<uint32_t>(tree.feature[k]);
    if (!tree.missing_left[k]) feature |= kMissingRight;
    if (tree.sets && tree.categorical[k]) feature |= kCategorical;
    out.nodes.push_back({feature, tree.threshold[k], left});
    out.leaf.push_back(-1);
    if (tree.sets) {
      out.sets.insert(out.sets.end(), tree.sets + kSetWords * k, tree.sets + kSetWords * (k + 1));
    }
    heap.push_back(FirstSplitBelow(tree, n_internal, 2 * k + 1));
    heap.push_back(FirstSplitBelow(tree, n_internal, 2 * k + 2));
    level.push_back(level[e] + 1);
    level.push_back(level[e] + 1);
    out.depth = std::max(out.depth, level[e] + 1);
  }
  return out;
}

// node[i] = the entry of the compacted tree each of the block's rows reaches.
template <bool kSets>
void WalkCompactBlock(const float* block, int64_t rows, int64_t n_features,
                      const CompactTree& tree, int32_t* node) {
  std::fill(node, node + rows, 0);
  const CompactNode* nodes = tree.nodes.data();
  for (int level = 0; level < tree.depth; ++level) {
    for (int64_t i = 0; i < rows; ++i) {
      const CompactNode& at = nodes[node[i]];
      const float v = block[i * n_features + (at.feature & kFeatureBits)];
      int32_t right;
      if (std::isnan(v)) {
        right = static_cast<int32_t>(at.feature >> 31);
      } else if (kSets && (at.feature & kCategorical)) {
        const int32_t code = static_cast<int32_t>(std::min(std::max(v, 0.0f), 255.0f));
        const uint32_t word = tree.sets[kSetWords * node[i] + (code >> 5)];
        right = static_cast<int32_t>(((word >> (code & 31)) & 1) == 0);
      } else {
        right = static_cast<int32_t>(v > at.threshold);
      }
      node[i] = at.left + right;
    }
  }
}

ffi::Error PredictImpl(ffi::Buffer<ffi::F32> X, ffi::Buffer<ffi::S32> feature,
                       ffi::Buffer<ffi::F32> threshold, ffi::Buffer<ffi::PRED> missing_left,
                       ffi::Buffer<ffi::F32> leaf_value, ffi::Buffer<ffi::U32> category_left,
                       ffi::ResultBuffer<ffi::F32> result) {
  auto x_dims = X.dimensions();
  auto node_dims = feature.dimensions();
  auto leaf_dims = leaf_value.dimensions();
  if (x_dims.size() != 2 || node_dims.size() != 2 || leaf_dims.size() != 3 ||
      threshold.dimensions().size() != 2 || missing_left.dimensions().size() != 2) {
    return ffi::Error::InvalidArgument("jaxboost predict: bad ranks");
  }
  const int64_t n_rows = x_dims[0], n_features = x_dims[1];
  const int64_t n_trees = node_dims[0], n_internal = node_dims[1];
  const int64_t n_leaves = leaf_dims[1], n_outputs = leaf_dims[2];
  if (leaf_dims[0] != n_trees || n_leaves != n_internal + 1 ||
      threshold.dimensions()[1] != n_internal || missing_left.dimensions()[1] != n_internal) {
    return ffi::Error::InvalidArgument("jaxboost predict: tree arrays disagree");
  }
  int depth = 0;
  while ((int64_t{1} << depth) < n_leaves) ++depth;
  const float* x = X.typed_data();
  const int32_t* features = feature.typed_data();
  const float* thresholds = threshold.typed_data();
  const bool* missing = missing_left.typed_data();
  const float* leaves = leaf_value.typed_data();
  for (int64_t i = 0; i < n_trees * n_internal; ++i) {
    if (features[i] < 0 || features[i] >= n_features) {
      return ffi::Error::InvalidArgument("jaxboost predict: split feature out of range");
    }
  }
  const int64_t n_set_words = category_left.element_count();
  if (n_set_words != 0 && n_set_words != n_trees * n_internal * kSetWords) {
    return ffi::Error::InvalidArgument("jaxboost predict: category_left not (n_trees, n_nodes, 8)");
  }
  const uint32_t* sets = n_set_words ? category_left.typed_data() : nullptr;
  std::vector<uint8_t> categorical(sets ? n_trees * n_internal : 0, 0);
  for (size_t i = 0; i < categorical.size(); ++i) {
    for (int64_t w = 0; w < kSetWords; ++w) categorical[i] |= sets[kSetWords * i + w] != 0;
  }
  auto tree_nodes = [&](int64_t t) {
    const int64_t start = t * n_internal;
    return TreeNodes{features + start, thresholds + start, missing + start,
                     sets ? sets + start * kSetWords : nullptr,
                     sets ? categorical.data() + start : nullptr};
  };
  // compacted where the table is smaller than the heap's node arrays (12 bytes
  // an entry, 2s + 1 entries for s splitting nodes, against 9 bytes a node);
  // the others walk the heap (as do all where a feature overflows its bits)
  std::vector<CompactTree> compact(n_trees);
  for (int64_t t = 0; t < n_trees && n_features <= kFeatureBits; ++t) {
    CompactTree tree = Compact(tree_nodes(t), n_internal);
    if (2 * static_cast<int64_t>(tree.nodes.size()) <= n_internal) {
      compact[t] = std::move(tree);
    }
  }
  float* out = result->typed_data();
  std::vector<double> sums(kBlockRows * n_outputs);
  int32_t node[kBlockRows];
  for (int64_t first = 0; first < n_rows; first += kBlockRows) {
    const int64_t rows = std::min(kBlockRows, n_rows - first);
    std::fill(sums.begin(), sums.end(), 0.0);
    const float* block = x + first * n_features;
    for (int64_t t = 0; t < n_trees; ++t) {
      const float* tree_leaves = leaves + t * n_leaves * n_outputs;
      const CompactTree& small = compact[t];
      if (!small.nodes.empty()) {
        if (sets) {
          WalkCompactBlock<true>(block, rows, n_features, small, node);
        } else {
          WalkCompactBlock<false>(block, rows, n_features, small, node);
        }
        for (int64_t i = 0; i < rows; ++i) node[i] = small.leaf[node[i]];
      } else {
        if (sets) {
          WalkBlock<true>(block, rows, n_features, depth, tree_nodes(t), node);
        } else {
          WalkBlock<false>(block, rows, n_features, depth, tree_nodes(t), node);
        }
        for (int64_t i = 0; i < rows; ++i) node[i] -= n_internal;
      }
      for (int64_t i = 0; i < rows; ++i) {
        const float* value = tree_leaves + node[i] * n_outputs;
        for (int64_t k = 0; k < n_outputs; ++k) sums[i * n_outputs + k] += value[k];
      }
    }
    for (int64_t i = 0; i < rows * n_outputs; ++i) {
      out[first * n_outputs + i] = static_cast<float>(sums[i]);
    }
  }
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxboostPredictForest, PredictImpl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::PRED>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>());
