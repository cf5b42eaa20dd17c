// Forest prediction for jaxboost on CPU, called from XLA through its FFI.
// Built with histogram.cc by jaxboost/native_library.py; the plain reference
// it must equal is jaxboost/predict.py (leaf_of_rows, predict_forest).
//
// Trees are complete and in heap order (node i has children 2i+1, 2i+2; the
// 2^D - 1 internal nodes first), or node tables with explicit children
// (leaf-wise trees, walked as compacted trees below): x <= threshold goes left, NaN goes left
// where missing_left; at a categorical node (a non-empty category set) the
// code x (clamped to [0, 255], truncated) goes left when it is in the set.
// Rows are walked in blocks, one level of every row of the block at a time,
// so the block's walks are independent and overlap.  A tree with far fewer
// splitting nodes than its heap (a leaf-wise tree in a deep heap) is first
// compacted into a small table of the splitting nodes reachable from the
// root, whose children are splitting nodes or leaves: a node that does not
// split sends every row left, so a chain of them is skipped to the first
// splitting node or leaf below on its left, the leaf the heap walk reaches.
// Its walk moves the block's rows still on a splitting node one level per
// pass and drops those that reach a leaf, so each row walks its own path
// (about 4.3 splits deep in 31-leaf trees within depth 12, whose deepest
// paths reach 10), not the tree's depth.
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

// A splitting node of a compacted tree: its children are splitting nodes
// (>= 0) or leaves (~leaf < 0, the leaf's position among the heap's leaves).
struct CompactNode {
  uint32_t feature;  // the feature, kMissingRight and kCategorical or'ed in
  float threshold;
  int32_t child[2];
};
constexpr uint32_t kMissingRight = 1u << 31;
constexpr uint32_t kCategorical = 1u << 30;
constexpr uint32_t kFeatureBits = kCategorical - 1;

// A compacted tree: its splitting nodes (none when the root's walk ends on a
// leaf), that leaf then, and each node's category set (8 words, with sets
// only); is_compact is false for trees walked through their heap.
struct CompactTree {
  std::vector<CompactNode> nodes;
  std::vector<uint32_t> sets;
  int32_t root_leaf = 0;
  bool is_compact = false;
};

// The heap node or leaf a row at heap node k reaches by the left children of
// nodes that do not split.
inline int64_t FirstSplitBelow(const TreeNodes& tree, int64_t n_internal, int64_t k) {
  while (k < n_internal && SendsAllLeft(tree, k)) k = 2 * k + 1;
  return k;
}

// The tree compacted in breadth-first order (node 0 the root's).
CompactTree Compact(const TreeNodes& tree, int64_t n_internal) {
  CompactTree out;
  out.is_compact = true;
  const int64_t root = FirstSplitBelow(tree, n_internal, 0);
  if (root >= n_internal) {
    out.root_leaf = static_cast<int32_t>(root - n_internal);
    return out;
  }
  std::vector<int64_t> heap{root};
  for (size_t e = 0; e < heap.size(); ++e) {
    const int64_t k = heap[e];
    uint32_t feature = static_cast<uint32_t>(tree.feature[k]);
    if (!tree.missing_left[k]) feature |= kMissingRight;
    if (tree.sets && tree.categorical[k]) feature |= kCategorical;
    CompactNode node{feature, tree.threshold[k], {0, 0}};
    for (int side = 0; side < 2; ++side) {
      const int64_t below = FirstSplitBelow(tree, n_internal, 2 * k + 1 + side);
      if (below >= n_internal) {
        node.child[side] = ~static_cast<int32_t>(below - n_internal);
      } else {
        node.child[side] = static_cast<int32_t>(heap.size());
        heap.push_back(below);
      }
    }
    out.nodes.push_back(node);
    if (tree.sets) {
      out.sets.insert(out.sets.end(), tree.sets + kSetWords * k, tree.sets + kSetWords * (k + 1));
    }
  }
  return out;
}

// 1 when value v goes right at a compacted tree's node at, whose category
// set (with sets) starts at set.
template <bool kSets>
inline int32_t CompactRight(const CompactNode& at, const uint32_t* set, float v) {
  if (std::isnan(v)) return static_cast<int32_t>(at.feature >> 31);
  if (kSets && (at.feature & kCategorical)) {
    const int32_t code = static_cast<int32_t>(std::min(std::max(v, 0.0f), 255.0f));
    return static_cast<int32_t>(((set[code >> 5] >> (code & 31)) & 1) == 0);
  }
  return static_cast<int32_t>(v > at.threshold);
}

// node[i] = the leaf (position among the heap's leaves) each of the block's
// rows reaches in a compacted tree.  Each pass moves every row still on a
// splitting node one level down and keeps only those still on one, so a row
// costs its own path's length and the rows of a pass overlap.  The root's
// pass reads no row's node (every row is on the root), which saves a fifth
// of the walk within depth 12.
template <bool kSets>
void WalkCompactBlock(const float* block, int64_t rows, int64_t n_features,
                      const CompactTree& tree, int32_t* node) {
  if (tree.nodes.empty()) {
    std::fill(node, node + rows, tree.root_leaf);
    return;
  }
  const CompactNode* nodes = tree.nodes.data();
  const uint32_t* sets = tree.sets.data();
  int32_t active[kBlockRows];
  int64_t n_active = 0;
  const CompactNode& root = nodes[0];
  for (int64_t i = 0; i < rows; ++i) {
    const float v = block[i * n_features + (root.feature & kFeatureBits)];
    const int32_t next = root.child[CompactRight<kSets>(root, sets, v)];
    node[i] = next;
    active[n_active] = static_cast<int32_t>(i);
    n_active += next >= 0;
  }
  while (n_active > 0) {
    int64_t kept = 0;
    for (int64_t j = 0; j < n_active; ++j) {
      const int32_t i = active[j];
      const int32_t k = node[i];
      const CompactNode& at = nodes[k];
      const float v = block[i * n_features + (at.feature & kFeatureBits)];
      const int32_t next = at.child[CompactRight<kSets>(at, sets + kSetWords * k, v)];
      node[i] = next;
      active[kept] = i;
      kept += next >= 0;
    }
    n_active = kept;
  }
  for (int64_t i = 0; i < rows; ++i) node[i] = ~node[i];
}

// A node-table tree (jaxboost.engine.bestfirst) as a compacted one: its
// internal nodes in their order (node 0 the root, children after their
// parent), children[2k + side] an internal node or ~leaf; nullptr, or what
// is wrong with the children.
const char* FromTable(const TreeNodes& tree, const int32_t* children, int64_t n_internal,
                      CompactTree& out) {
  out.is_compact = true;
  out.nodes.resize(n_internal);
  for (int64_t k = 0; k < n_internal; ++k) {
    uint32_t feature = static_cast<uint32_t>(tree.feature[k]);
    if (!tree.missing_left[k]) feature |= kMissingRight;
    if (tree.sets && tree.categorical[k]) feature |= kCategorical;
    CompactNode node{feature, tree.threshold[k], {children[2 * k], children[2 * k + 1]}};
    for (int side = 0; side < 2; ++side) {
      const int32_t c = node.child[side];
      if ((c >= 0 && (c <= k || c >= n_internal)) || (c < 0 && ~c > n_internal)) {
        return "jaxboost predict: a child index out of range";
      }
    }
    out.nodes[k] = node;
    if (tree.sets) {
      out.sets.insert(out.sets.end(), tree.sets + kSetWords * k, tree.sets + kSetWords * (k + 1));
    }
  }
  return nullptr;
}

// The forest's raw scores of X's rows into `out` (n_rows, n_outputs);
// nullptr, or what is wrong with the arrays.  `sets` has n_set_words words:
// 0 without category sets; `children` (n_trees, n_internal, 2) for node
// tables, else nullptr (heap trees).
const char* PredictRows(const float* x, int64_t n_rows, int64_t n_features,
                        const int32_t* features, const float* thresholds, const bool* missing,
                        const float* leaves, const uint32_t* sets, int64_t n_set_words,
                        int64_t n_trees, int64_t n_internal, int64_t n_outputs,
                        const int32_t* children, float* out) {
  const int64_t n_leaves = n_internal + 1;
  int depth = 0;
  while ((int64_t{1} << depth) < n_leaves) ++depth;
  for (int64_t i = 0; i < n_trees * n_internal; ++i) {
    if (features[i] < 0 || features[i] >= n_features) {
      return "jaxboost predict: split feature out of range";
    }
  }
  if (n_set_words != 0 && n_set_words != n_trees * n_internal * kSetWords) {
    return "jaxboost predict: category_left not (n_trees, n_nodes, 8)";
  }
  if (n_set_words == 0) sets = nullptr;
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
  // compacted where its splitting nodes s are few for the heap (4s + 2 <=
  // 2^D - 1, as leaf-wise trees in deep heaps): walking a row's own path costs
  // about twice a lockstep level a step, so fuller heaps (a depth-6 tree of 30
  // splits) walk all D levels of the heap faster; so do all trees where a
  // feature overflows its bits.  A tree with too many splitting nodes in its
  // heap (reachable or not) is not compacted at all: a call on one row then
  // costs its walk, not a compaction of every tree (bench_predict.py
  // --batch-sizes)
  std::vector<CompactTree> compact(n_trees);
  if (children != nullptr && n_features > kFeatureBits) {
    return "jaxboost predict: too many features for a node table's walk";
  }
  for (int64_t t = 0; t < n_trees && children != nullptr; ++t) {
    const char* failure =
        FromTable(tree_nodes(t), children + 2 * t * n_internal, n_internal, compact[t]);
    if (failure != nullptr) return failure;
  }
  for (int64_t t = 0; t < n_trees && n_features <= kFeatureBits && children == nullptr; ++t) {
    int64_t n_splitting = 0;
    for (int64_t k = 0; k < n_internal; ++k) n_splitting += !SendsAllLeft(tree_nodes(t), k);
    if (4 * n_splitting + 2 > n_internal) continue;
    CompactTree tree = Compact(tree_nodes(t), n_internal);
    if (4 * static_cast<int64_t>(tree.nodes.size()) + 2 <= n_internal) {
      compact[t] = std::move(tree);
    }
  }
  std::vector<double> sums(kBlockRows * n_outputs);
  int32_t node[kBlockRows];
  for (int64_t first = 0; first < n_rows; first += kBlockRows) {
    const int64_t rows = std::min(kBlockRows, n_rows - first);
    std::fill(sums.begin(), sums.end(), 0.0);
    const float* block = x + first * n_features;
    for (int64_t t = 0; t < n_trees; ++t) {
      const float* tree_leaves = leaves + t * n_leaves * n_outputs;
      const CompactTree& small = compact[t];
      if (small.is_compact) {
        if (sets) {
          WalkCompactBlock<true>(block, rows, n_features, small, node);
        } else {
          WalkCompactBlock<false>(block, rows, n_features, small, node);
        }
      } else {
        if (sets) {
          WalkBlock<true>(block, rows, n_features, depth, tree_nodes(t), node);
        } else {
          WalkBlock<false>(block, rows, n_features, depth, tree_nodes(t), node);
        }
        for (int64_t i = 0; i < rows; ++i) node[i] -= n_internal;
      }
      if (n_outputs == 1) {  // the inner loop's count known: 7% of the walk
        for (int64_t i = 0; i < rows; ++i) sums[i] += tree_leaves[node[i]];
      } else {
        for (int64_t i = 0; i < rows; ++i) {
          const float* value = tree_leaves + node[i] * n_outputs;
          for (int64_t k = 0; k < n_outputs; ++k) sums[i * n_outputs + k] += value[k];
        }
      }
    }
    for (int64_t i = 0; i < rows * n_outputs; ++i) {
      out[first * n_outputs + i] = static_cast<float>(sums[i]);
    }
  }
  return nullptr;
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
  const int64_t n_trees = node_dims[0], n_internal = node_dims[1];
  if (leaf_dims[0] != n_trees || leaf_dims[1] != n_internal + 1 ||
      threshold.dimensions()[1] != n_internal || missing_left.dimensions()[1] != n_internal) {
    return ffi::Error::InvalidArgument("jaxboost predict: tree arrays disagree");
  }
  const int64_t n_set_words = category_left.element_count();
  const char* error = PredictRows(
      X.typed_data(), x_dims[0], x_dims[1], feature.typed_data(), threshold.typed_data(),
      missing_left.typed_data(), leaf_value.typed_data(),
      n_set_words ? category_left.typed_data() : nullptr, n_set_words, n_trees, n_internal,
      leaf_dims[2], nullptr, result->typed_data());
  return error ? ffi::Error::InvalidArgument(error) : ffi::Error::Success();
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

// The same walk called from the host (ctypes) on host arrays, with no XLA
// program: a batch of any size compiles nothing (jaxboost.engine.predict's
// predict_forest_host).  Shapes as above, passed apart, and node tables'
// children (n_trees, n_internal, 2) or null; returns 0, or 1 with the
// message in `error` (up to `error_size` bytes, NUL-terminated).
extern "C" int JaxboostPredictForestHost(const float* x, int64_t n_rows, int64_t n_features,
                                         const int32_t* feature, const float* threshold,
                                         const bool* missing_left, const float* leaf_value,
                                         const uint32_t* category_left, int64_t n_set_words,
                                         int64_t n_trees, int64_t n_internal, int64_t n_outputs,
                                         const int32_t* children, float* result, char* error,
                                         int64_t error_size) {
  const char* failure =
      PredictRows(x, n_rows, n_features, feature, threshold, missing_left, leaf_value,
                  category_left, n_set_words, n_trees, n_internal, n_outputs, children, result);
  if (failure == nullptr) return 0;
  int64_t i = 0;
  for (; failure[i] != 0 && i + 1 < error_size; ++i) error[i] = failure[i];
  if (error_size > 0) error[i] = 0;
  return 1;
}
