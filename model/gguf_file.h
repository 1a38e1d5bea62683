// GgufFile: a validated, read-only view of a GGUF (v2/v3) file mapped into
// memory.
//
// Contract: Open() maps the file and checks every byte it will ever hand out
// before returning: the magic, the version, the counts, every string and
// array length, every metadata value type, every tensor's rank, dims (no
// overflow), type, offset, alignment and size. A malformed or truncated file
// yields an InvalidArgument status that names the file and the problem; after
// a successful Open no accessor can read outside the mapping.
//
// Ownership: the GgufFile owns the mapping. Every string_view and data
// pointer it returns (metadata strings, tensor data) borrows from it and is
// valid for the GgufFile's lifetime. The object is immutable after Open and
// safe to share between threads.
#ifndef KVSESSION_MODEL_GGUF_FILE_H_
#define KVSESSION_MODEL_GGUF_FILE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/ggml_types.h"

namespace kvs {

enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

std::string_view GgufValueTypeName(GgufValueType type);

// A string from a GGUF file (a key, a tensor name, a metadata value) for an
// error message: proto/bounded_quote.h's Quote() of at most 64 bytes,
// 'abc\xff...' (100000 bytes). A file can hold strings of any length and
// bytes; messages reach logs and gRPC clients. Pure.
std::string QuoteGgufString(std::string_view s);

// One metadata value. Scalars are widened into the matching field (unsigned
// integers into `u`, signed into `i`, floats into `f`); strings and arrays
// borrow from the mapping.
struct GgufValue {
  GgufValueType type = GgufValueType::kUint8;
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0;
  bool b = false;
  std::string_view str;
  // Arrays: element type, element count, and the first element's bytes
  // (unaligned; read through the typed accessors of GgufFile). String
  // arrays are split into `strings` at parse time.
  GgufValueType elem_type = GgufValueType::kUint8;
  uint64_t count = 0;
  const uint8_t* elems = nullptr;
  std::vector<std::string_view> strings;
};

// One tensor: name, ggml type, shape (ne[0] is the row length, the fastest
// varying dimension) and its bytes inside the mapping.
struct GgufTensor {
  std::string name;
  uint32_t type = 0;  // a GgmlType value
  int n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};
  uint64_t offset = 0;  // relative to the data section
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;

  int64_t row_length() const { return ne[0]; }
  int64_t n_rows() const { return static_cast<int64_t>(n_elements) / ne[0]; }
  std::string ShapeString() const;  // "[4096, 32000]"
};

class GgufFile {
 public:
  // Maps and validates `path`. Errors: NotFound (no such file),
  // InvalidArgument (not a valid GGUF file; the message says what is wrong
  // and where), Internal (mmap failure).
  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);

  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  size_t file_size() const { return size_; }
  size_t alignment() const { return alignment_; }

  // Metadata in file order, and lookup by key (nullptr when absent).
  const std::vector<std::pair<std::string_view, GgufValue>>& metadata() const {
    return metadata_;
  }
  const GgufValue* Find(std::string_view key) const;

  // Typed getters. Absent key: `fallback` if given, else NotFound. Present
  // with an incompatible type or value (e.g. a negative number for
  // GetUint): InvalidArgument naming the key.
  absl::StatusOr<uint64_t> GetUint(std::string_view key,
                                   std::optional<uint64_t> fallback = {}) const;
  absl::StatusOr<int64_t> GetInt(std::string_view key,
                                 std::optional<int64_t> fallback = {}) const;
  absl::StatusOr<double> GetFloat(std::string_view key,
                                  std::optional<double> fallback = {}) const;
  absl::StatusOr<bool> GetBool(std::string_view key,
                               std::optional<bool> fallback = {}) const;
  absl::StatusOr<std::string_view> GetString(
      std::string_view key, std::optional<std::string_view> fallback = {}) const;
  // Arrays: NotFound when absent, InvalidArgument on element type mismatch.
  absl::StatusOr<const std::vector<std::string_view>*> GetStringArray(
      std::string_view key) const;
  absl::StatusOr<std::vector<float>> GetFloatArray(std::string_view key) const;
  absl::StatusOr<std::vector<int64_t>> GetIntArray(std::string_view key) const;

  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* FindTensor(std::string_view name) const;

  // Bytes of all tensor data (the data section).
  uint64_t tensor_data_bytes() const { return size_ - data_offset_; }

 private:
  class Cursor;  // bounds-checked reader over the mapping (gguf_file.cc)

  GgufFile() = default;
  // Parses and validates the whole mapping: the four phases below in file
  // order. InvalidArgument (via Error) on the first problem.
  absl::Status Parse();
  // Magic, version and the two counts; rejects counts the rest of the file
  // cannot hold before anything is allocated for them.
  absl::Status ParseHeader(Cursor& c, uint64_t* n_tensors, uint64_t* n_kv);
  // n_kv key/value pairs into metadata_ (keys unique), then
  // general.alignment into alignment_.
  absl::Status ParseMetadata(Cursor& c, uint64_t n_kv);
  // The value of `key`, of type `out->type` (already read and known).
  absl::Status ParseMetadataValue(Cursor& c, std::string_view key, GgufValue* out);
  // n_tensors tensor infos into tensors_ (names unique; rank, dims, type,
  // byte size and offset alignment checked; data not yet located).
  absl::Status ParseTensorInfos(Cursor& c, uint64_t n_tensors);
  // Places the data section at the aligned end of the infos
  // (`infos_end`), checks every tensor lies inside it without overlapping
  // another, and sets each tensor's data pointer.
  absl::Status LocateTensorData(size_t infos_end);
  // InvalidArgument "<path>: invalid GGUF: <what>".
  absl::Status Error(std::string_view what) const;

  std::string path_;
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  uint32_t version_ = 0;
  size_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string_view, GgufValue>> metadata_;
  absl::flat_hash_map<std::string_view, size_t> metadata_index_;
  std::vector<GgufTensor> tensors_;
  absl::flat_hash_map<std::string, size_t> tensor_index_;
};

}  // namespace kvs

#endif  // KVSESSION_MODEL_GGUF_FILE_H_
