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
//
// Shapes (row-major):
//   keys   (..., n) float32, any leading shape
//   order  (..., n) int32

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

// Bits of a float32 whose unsigned order is the floats' order as lax.sort
// takes it: -0.0 as 0.0, every NaN above +inf.
uint32_t OrderBits(float value) {
  if (std::isnan(value)) return 0xffffffffu;
  if (value == 0.0f) value = 0.0f;
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

ffi::Error OrderImpl(ffi::Buffer<ffi::F32> keys, ffi::ResultBuffer<ffi::S32> order) {
  auto dims = keys.dimensions();
  if (dims.size() == 0 || order->element_count() != keys.element_count()) {
    return ffi::Error::InvalidArgument("jaxboost category order: keys not (..., n)");
  }
  const int64_t n = dims[dims.size() - 1];
  if (n == 0) return ffi::Error::Success();
  const int64_t n_lists = keys.element_count() / n;
  const float* key = keys.typed_data();
  int32_t* out = order->typed_data();
  // one sort of (key's order bits, index) words: the index breaks ties as a
  // stable sort would, and unique words need no stable sort
  std::vector<uint64_t> word(n);
  for (int64_t i = 0; i < n_lists; ++i) {
    const float* row = key + i * n;
    for (int64_t j = 0; j < n; ++j) word[j] = (uint64_t{OrderBits(row[j])} << 32) | j;
    std::sort(word.begin(), word.end());
    int32_t* sorted = out + i * n;
    for (int64_t j = 0; j < n; ++j) sorted[j] = static_cast<int32_t>(word[j] & 0xffffffffu);
  }
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxboostCategoryOrder, OrderImpl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::S32>>());
