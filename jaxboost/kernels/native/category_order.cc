// Sorting a node's categories for jaxboost's categorical split search on
// CPU, called from XLA through its FFI.  Built with the other kernels by
// jaxboost/native_library.py; the plain reference it must equal is
// jnp.argsort(keys, axis=-1, stable=True).
//
// The search sorts every (feature, node)'s 256 category bins by their
// gradient-over-hessian ratio at every level; XLA's CPU sort calls its
// comparator through a pointer for every comparison: 42 ms a level of 12
// features and 32 nodes (50k rows, one thread), 30 times the rest of the
// split search.
//
//   JaxboostCategoryOrder: order[..., j] = the index of the j-th smallest
//     of keys[..., :], ties in index order, NaN last (as lax.sort orders
//     floats: -0.0 equals 0.0, every NaN after +inf).
//   JaxboostCategorySums: that order, and left[..., j, :] = the sums of the
//     first j + 1 bins in that order (float32, added in order: jnp.cumsum
//     of the sorted sums) where prefix, else bin order[j]'s own sums (a
//     one-vs-rest feature).  XLA's CPU cumsum costs 0.8 s of compilation
//     per level of a tree and runs slowly (reduce_window).
//
// Shapes (row-major):
//   keys    (..., n) float32, any leading shape
//   sums    (..., n, c) float32
//   prefix  (...) bool
//   order   (..., n) int32
//   left    (..., n, c) float32

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "category_split.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

using jaxboost_category::SortList;

ffi::Error OrderImpl(ffi::Buffer<ffi::F32> keys, ffi::ResultBuffer<ffi::S32> order) {
  auto dims = keys.dimensions();
  if (dims.size() == 0 || order->element_count() != keys.element_count()) {
    return ffi::Error::InvalidArgument("jaxboost category order: keys not (..., n)");
  }
  const int64_t n = dims[dims.size() - 1];
  if (n == 0) return ffi::Error::Success();
  const int64_t n_lists = keys.element_count() / n;
  std::vector<uint64_t> word(n);
  for (int64_t i = 0; i < n_lists; ++i) {
    SortList(keys.typed_data() + i * n, n, word, order->typed_data() + i * n);
  }
  return ffi::Error::Success();
}

ffi::Error SumsImpl(ffi::Buffer<ffi::F32> keys, ffi::Buffer<ffi::F32> sums,
                    ffi::Buffer<ffi::PRED> prefix, ffi::ResultBuffer<ffi::S32> order,
                    ffi::ResultBuffer<ffi::F32> left) {
  auto dims = keys.dimensions();
  if (dims.size() == 0 || order->element_count() != keys.element_count()) {
    return ffi::Error::InvalidArgument("jaxboost category sums: keys not (..., n)");
  }
  const int64_t n = dims[dims.size() - 1];
  if (n == 0) return ffi::Error::Success();
  const int64_t n_lists = keys.element_count() / n;
  const int64_t n_values = sums.element_count() / std::max<int64_t>(1, keys.element_count());
  if (sums.element_count() != keys.element_count() * n_values ||
      left->element_count() != sums.element_count() || prefix.element_count() != n_lists) {
    return ffi::Error::InvalidArgument("jaxboost category sums: shapes differ");
  }
  std::vector<uint64_t> word(n);
  std::vector<float> running(n_values);
  for (int64_t i = 0; i < n_lists; ++i) {
    int32_t* sorted = order->typed_data() + i * n;
    SortList(keys.typed_data() + i * n, n, word, sorted);
    const float* from = sums.typed_data() + i * n * n_values;
    float* to = left->typed_data() + i * n * n_values;
    const bool cumulative = prefix.typed_data()[i];
    std::fill(running.begin(), running.end(), 0.0f);
    for (int64_t j = 0; j < n; ++j) {
      const float* bin = from + sorted[j] * n_values;
      for (int64_t v = 0; v < n_values; ++v) {
        running[v] = cumulative ? running[v] + bin[v] : bin[v];
        to[j * n_values + v] = running[v];
      }
    }
  }
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxboostCategoryOrder, OrderImpl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::S32>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxboostCategorySums, SumsImpl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::PRED>>()
                                  .Ret<ffi::Buffer<ffi::S32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>());
