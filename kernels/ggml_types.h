// ggml tensor element types as GGUF files number them, with their block
// geometry.
//
// Every type is stored in blocks: `block_elems` consecutive elements of a row
// occupy `block_bytes` bytes. A row of n elements therefore takes
// n / block_elems * block_bytes bytes and n must be a multiple of
// block_elems. This table is the single place that knows those numbers; the
// GGUF reader uses it to validate tensor sizes for every type a file may
// contain, and the model uses it to reject types it cannot compute with.
#ifndef KVSESSION_KERNELS_GGML_TYPES_H_
#define KVSESSION_KERNELS_GGML_TYPES_H_

#include <cstdint>
#include <string_view>

namespace kvs {

enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
};

struct GgmlTypeTraits {
  std::string_view name;  // "" for numbers that are not a known type
  uint32_t block_elems;   // elements per block (1 for plain types)
  uint32_t block_bytes;   // bytes per block
};

// Traits of `type`; `name` is empty when the number is not a ggml type.
GgmlTypeTraits GgmlTraits(uint32_t type);

// "Q8_0", "F16", ... or "type 123" for unknown numbers.
std::string GgmlTypeName(uint32_t type);

}  // namespace kvs

#endif  // KVSESSION_KERNELS_GGML_TYPES_H_
