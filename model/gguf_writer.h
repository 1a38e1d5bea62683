// GgufWriter: builds a GGUF v3 file from metadata and tensors.
//
// Used by the model synthesizer (tools/) and by tests that need hand-made
// (and hand-broken) files. Metadata keeps insertion order; tensors are laid
// out in insertion order, each aligned to `general.alignment` (32). Tensor
// bytes come either as a buffer or from a fill callback that writes
// n_bytes directly into the output stream's buffer, so multi-hundred-MB
// models are produced without holding every tensor at once.
#ifndef KVSESSION_MODEL_GGUF_WRITER_H_
#define KVSESSION_MODEL_GGUF_WRITER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kernels/ggml_types.h"
#include "model/gguf_file.h"

namespace kvs {

class GgufWriter {
 public:
  using FillFn = std::function<void(uint8_t* dst, size_t n_bytes)>;

  void AddUint32(std::string key, uint32_t v);
  void AddInt32(std::string key, int32_t v);
  void AddUint64(std::string key, uint64_t v);
  void AddFloat32(std::string key, float v);
  void AddBool(std::string key, bool v);
  void AddString(std::string key, std::string v);
  void AddStringArray(std::string key, const std::vector<std::string>& v);
  void AddFloat32Array(std::string key, const std::vector<float>& v);
  void AddInt32Array(std::string key, const std::vector<int32_t>& v);

  // dims[0] is the row length. `bytes` must hold exactly the tensor's size.
  void AddTensor(std::string name, GgmlType type, std::vector<int64_t> dims, std::string bytes);
  void AddTensor(std::string name, GgmlType type, std::vector<int64_t> dims, FillFn fill);

  // The serialized header (magic through tensor infos, padded), and the
  // whole file.
  std::string SerializeHeader() const;
  std::string Serialize() const;
  absl::Status WriteFile(const std::string& path) const;

  static uint64_t TensorBytes(GgmlType type, const std::vector<int64_t>& dims);

 private:
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> dims;
    uint64_t n_bytes;
    uint64_t offset;
    std::string bytes;
    FillFn fill;
  };
  void AddRaw(std::string key, GgufValueType type, std::string payload);
  template <typename Sink>
  void WriteTensors(Sink&& sink) const;

  std::vector<std::string> kv_;  // each: serialized key + type + value
  std::vector<Tensor> tensors_;
  uint64_t data_size_ = 0;
  static constexpr uint64_t kAlignment = 32;
};

}  // namespace kvs

#endif  // KVSESSION_MODEL_GGUF_WRITER_H_
