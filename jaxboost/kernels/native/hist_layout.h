// Where a level's histograms lie in the histogram kernels' buffers
// (histogram.cc).  Bin b of feature f at node k is slot
//
//   first[f] + k * node_stride + min(b, last[f]) * bin_stride
//
// of a buffer of slots (each n_stored sums, or their running sums), in one
// of three layouts:
//
//   padded (n_features, n_nodes, n_bins): every feature n_bins slots per
//     node, first[f] = f * n_nodes * n_bins, node_stride = n_bins,
//     bin_stride = 1, last[f] = n_bins - 1 (the missing bin);
//   packed (n_nodes, n_slots): a node's slots hold feature after feature,
//     each feature's value bins and then its missing bin, feature f in slots
//     [start[f], start[f + 1]) (jaxboost.kernels.interfaces.SlotLayout):
//     first[f] = start[f], node_stride = n_slots, bin_stride = 1, last[f] =
//     start[f + 1] - start[f] - 1.  Slots from start[n_features] on are
//     padding, zero.  A feature's value bins must be below last[f]; the
//     passes clamp the bins of the features that may have missing values
//     (may_miss), so that their missing bin, whatever its number, is summed
//     in slot last[f], and take the others' bins as they are;
//   packed slot-major (n_slots, n_nodes): the same slots, every node's
//     copy of a slot side by side (first[f] = start[f] * n_nodes,
//     node_stride = 1, bin_stride = n_nodes): how the kernels return packed
//     running sums, so that the split search gathers whole rows of nodes.
//
// Packed, a level's histograms take only the bins the features use, not the
// widest feature's for every feature: on LightGBM's ranking data (218
// features of 2 to 98 value bins, padded to 112 bins) 6874 slots a node
// instead of 24416.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

struct HistLayout {
  std::vector<int64_t> first;  // (n_features,) slot of bin 0 at node 0
  std::vector<uint8_t> last;   // (n_features,) the missing bin's slot, from first
  std::vector<uint8_t> may_miss;  // (n_features,) 1: bins may be the missing bin
  int64_t n_nodes = 0;
  int64_t node_stride = 0;     // slots from a node's bin to the next node's
  int64_t bin_stride = 1;      // slots from a bin to the next
  int64_t slots_per_node = 0;  // packed: the features' slots, then padding
  int64_t slots_used = 0;      // packed: the features' slots
  bool feature_major = true;   // padded

  static HistLayout Padded(int64_t n_features, int64_t n_nodes, int64_t n_bins) {
    HistLayout layout;
    layout.first.resize(n_features);
    for (int64_t f = 0; f < n_features; ++f) layout.first[f] = f * n_nodes * n_bins;
    layout.last.assign(n_features, static_cast<uint8_t>(n_bins - 1));
    layout.may_miss.assign(n_features, 0);  // the missing bin is the last: nothing to clamp
    layout.n_nodes = n_nodes;
    layout.node_stride = n_bins;
    layout.slots_per_node = layout.slots_used = n_features * n_bins;
    return layout;
  }

  // The packed layout of `start` (n_features + 1,), node-major, whose
  // features f with has_missing[f] 0 have no missing values; false unless
  // every feature takes 2 to n_bins slots and all of them fit in n_slots.
  static bool Packed(const int32_t* start, const bool* has_missing, int64_t n_features,
                     int64_t n_nodes, int64_t n_slots, int64_t n_bins, HistLayout* layout) {
    layout->first.resize(n_features);
    layout->last.resize(n_features);
    layout->may_miss.assign(has_missing, has_missing + n_features);
    if (n_features > 0 && start[0] != 0) return false;
    for (int64_t f = 0; f < n_features; ++f) {
      const int64_t width = int64_t{start[f + 1]} - start[f];
      if (width < 2 || width > n_bins) return false;
      layout->first[f] = start[f];
      layout->last[f] = static_cast<uint8_t>(width - 1);
    }
    if (start[n_features] > n_slots) return false;
    layout->n_nodes = n_nodes;
    layout->node_stride = n_slots;
    layout->bin_stride = 1;
    layout->slots_per_node = n_slots;
    layout->slots_used = start[n_features];
    layout->feature_major = false;
    return true;
  }

  // A packed layout's slot-major twin; the padded layout itself.
  HistLayout SlotMajor() const {
    if (feature_major) return *this;
    HistLayout layout = *this;
    for (int64_t& slot : layout.first) slot *= n_nodes;
    layout.node_stride = 1;
    layout.bin_stride = n_nodes;
    return layout;
  }

  int64_t n_features() const { return static_cast<int64_t>(first.size()); }
  int64_t n_slots() const { return n_nodes * slots_per_node; }
  // where feature f's bin 0 at node k is; its bins are Bins(f)
  int64_t Segment(int64_t f, int64_t k) const { return first[f] + k * node_stride; }
  int64_t Bins(int64_t f) const { return int64_t{last[f]} + 1; }
  // whether any of `count` features from `f` may have missing values
  bool MayMiss(int64_t f, int64_t count) const {
    return std::any_of(may_miss.begin() + f, may_miss.begin() + f + count,
                       [](uint8_t miss) { return miss != 0; });
  }

  // body(f, k) for every feature and node, feature by feature: a feature's
  // slot-major running sums, written bin by bin for each node, stay in cache
  // (node by node, the 32-node level of rank.train wrote all 1.8 MB of them
  // once per parent)
  template <typename Body>
  void ForEachSegment(Body&& body) const {
    for (int64_t f = 0; f < n_features(); ++f) {
      for (int64_t k = 0; k < n_nodes; ++k) body(f, k);
    }
  }

  // the features' slots of the nodes k with keep[k] set to 0 (`width` values
  // a slot): packed, a node's slots in one run
  template <typename T>
  void ZeroNodes(T* buffer, int64_t width, const std::vector<uint8_t>& keep) const {
    for (int64_t k = 0; k < n_nodes; ++k) {
      if (!keep[k]) continue;
      if (!feature_major && bin_stride == 1) {
        std::fill_n(buffer + k * node_stride * width, slots_used * width, T(0));
        continue;
      }
      for (int64_t f = 0; f < n_features(); ++f) {
        std::fill_n(buffer + Segment(f, k) * width, Bins(f) * width, T(0));
      }
    }
  }

  // Features in blocks [blocks[i], blocks[i + 1]) for a pass that goes block
  // by block and node by node within a block: in a packed node-major layout
  // a node's segments of a block lie in one run (long streams for the
  // prefetchers rather than one short segment per node and feature), while
  // the block's slot-major running sums, `running_bytes` a slot and node,
  // stay within about 128 KiB (in L2).  Padded, every feature is a block
  // (its nodes' segments lie in one run already).
  std::vector<int64_t> FeatureBlocks(int64_t running_bytes) const {
    std::vector<int64_t> blocks{0};
    const int64_t most = feature_major ? 0 : (int64_t{128} << 10) / (running_bytes * n_nodes);
    int64_t slots = 0;
    for (int64_t f = 0; f < n_features(); ++f) {
      if (slots > 0 && slots + Bins(f) > most) {
        blocks.push_back(f);
        slots = 0;
      }
      slots += Bins(f);
    }
    if (n_features() > 0) blocks.push_back(n_features());
    return blocks;
  }

  // buffer's padding slots (`width` values each) set to 0
  template <typename T>
  void ZeroPadding(T* buffer, int64_t width) const {
    for (int64_t k = 0; k < n_nodes; ++k) {
      for (int64_t slot = slots_used; slot < slots_per_node; ++slot) {
        std::fill_n(buffer + (k * node_stride + slot * bin_stride) * width, width, T(0));
      }
    }
  }
};
