// libFuzzer target: GgufFile::Open on arbitrary bytes (model/gguf_file.h).
//
// Open() promises that any file either fails with a status or yields a view
// whose accessors never read outside the mapping; this walks every accessor
// over every metadata key and tensor so ASan sees each read.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "model/gguf_file.h"

namespace {

// Open() takes a path, so each input goes through one scratch file per process.
std::string ScratchPath() {
  const char* tmp = getenv("TMPDIR");
  return std::string(tmp ? tmp : "/tmp") + "/kvs-gguf-fuzz-" + std::to_string(getpid()) + ".gguf";
}

void WalkEverything(const kvs::GgufFile& f) {
  volatile uint64_t sink = 0;
  for (const auto& [key, value] : f.metadata()) {
    sink = sink + key.size() + value.str.size() + value.strings.size();
    (void)f.GetUint(key);
    (void)f.GetInt(key);
    (void)f.GetFloat(key);
    (void)f.GetBool(key);
    (void)f.GetString(key);
    (void)f.GetStringArray(key);
    (void)f.GetFloatArray(key);
    (void)f.GetIntArray(key);
  }
  for (const kvs::GgufTensor& t : f.tensors()) {
    if (f.FindTensor(t.name) == nullptr) __builtin_trap();
    (void)t.ShapeString();
    // First and last byte of the tensor's data must be inside the mapping.
    if (t.n_bytes > 0) sink = sink + t.data[0] + t.data[t.n_bytes - 1];
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = ScratchPath();
  FILE* out = std::fopen(path.c_str(), "wb");
  if (out == nullptr) return 0;
  std::fwrite(data, 1, size, out);
  std::fclose(out);
  auto file = kvs::GgufFile::Open(path);
  if (file.ok()) WalkEverything(**file);
  std::remove(path.c_str());
  return 0;
}
