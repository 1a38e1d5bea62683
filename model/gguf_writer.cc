#include "model/gguf_writer.h"

#include <cstdio>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"

namespace kvs {
namespace {

template <typename T>
void Put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

void PutString(std::string* out, std::string_view s) {
  Put<uint64_t>(out, s.size());
  out->append(s);
}

}  // namespace

void GgufWriter::AddRaw(std::string key, GgufValueType type, std::string payload) {
  std::string kv;
  PutString(&kv, key);
  Put<uint32_t>(&kv, static_cast<uint32_t>(type));
  kv += payload;
  kv_.push_back(std::move(kv));
}

void GgufWriter::AddUint32(std::string key, uint32_t v) {
  std::string p;
  Put(&p, v);
  AddRaw(std::move(key), GgufValueType::kUint32, std::move(p));
}
void GgufWriter::AddInt32(std::string key, int32_t v) {
  std::string p;
  Put(&p, v);
  AddRaw(std::move(key), GgufValueType::kInt32, std::move(p));
}
void GgufWriter::AddUint64(std::string key, uint64_t v) {
  std::string p;
  Put(&p, v);
  AddRaw(std::move(key), GgufValueType::kUint64, std::move(p));
}
void GgufWriter::AddFloat32(std::string key, float v) {
  std::string p;
  Put(&p, v);
  AddRaw(std::move(key), GgufValueType::kFloat32, std::move(p));
}
void GgufWriter::AddBool(std::string key, bool v) {
  std::string p;
  Put<uint8_t>(&p, v ? 1 : 0);
  AddRaw(std::move(key), GgufValueType::kBool, std::move(p));
}
void GgufWriter::AddString(std::string key, std::string v) {
  std::string p;
  PutString(&p, v);
  AddRaw(std::move(key), GgufValueType::kString, std::move(p));
}
void GgufWriter::AddStringArray(std::string key, const std::vector<std::string>& v) {
  std::string p;
  Put<uint32_t>(&p, static_cast<uint32_t>(GgufValueType::kString));
  Put<uint64_t>(&p, v.size());
  for (const std::string& s : v) PutString(&p, s);
  AddRaw(std::move(key), GgufValueType::kArray, std::move(p));
}
void GgufWriter::AddFloat32Array(std::string key, const std::vector<float>& v) {
  std::string p;
  Put<uint32_t>(&p, static_cast<uint32_t>(GgufValueType::kFloat32));
  Put<uint64_t>(&p, v.size());
  for (float x : v) Put(&p, x);
  AddRaw(std::move(key), GgufValueType::kArray, std::move(p));
}
void GgufWriter::AddInt32Array(std::string key, const std::vector<int32_t>& v) {
  std::string p;
  Put<uint32_t>(&p, static_cast<uint32_t>(GgufValueType::kInt32));
  Put<uint64_t>(&p, v.size());
  for (int32_t x : v) Put(&p, x);
  AddRaw(std::move(key), GgufValueType::kArray, std::move(p));
}

uint64_t GgufWriter::TensorBytes(GgmlType type, const std::vector<int64_t>& dims) {
  GgmlTypeTraits t = GgmlTraits(static_cast<uint32_t>(type));
  uint64_t n = 1;
  for (int64_t d : dims) n *= static_cast<uint64_t>(d);
  return n / t.block_elems * t.block_bytes;
}

void GgufWriter::AddTensor(std::string name, GgmlType type, std::vector<int64_t> dims,
                           std::string bytes) {
  Tensor t{std::move(name), type, std::move(dims), 0, data_size_, std::move(bytes), nullptr};
  t.n_bytes = t.bytes.size();
  data_size_ += (t.n_bytes + kAlignment - 1) / kAlignment * kAlignment;
  tensors_.push_back(std::move(t));
}

void GgufWriter::AddTensor(std::string name, GgmlType type, std::vector<int64_t> dims,
                           FillFn fill) {
  uint64_t n = TensorBytes(type, dims);
  Tensor t{std::move(name), type, std::move(dims), n, data_size_, {}, std::move(fill)};
  data_size_ += (n + kAlignment - 1) / kAlignment * kAlignment;
  tensors_.push_back(std::move(t));
}

std::string GgufWriter::SerializeHeader() const {
  std::string out;
  out.append("GGUF", 4);
  Put<uint32_t>(&out, 3);
  Put<uint64_t>(&out, tensors_.size());
  Put<uint64_t>(&out, kv_.size());
  for (const std::string& kv : kv_) out += kv;
  for (const Tensor& t : tensors_) {
    PutString(&out, t.name);
    Put<uint32_t>(&out, static_cast<uint32_t>(t.dims.size()));
    for (int64_t d : t.dims) Put<uint64_t>(&out, static_cast<uint64_t>(d));
    Put<uint32_t>(&out, static_cast<uint32_t>(t.type));
    Put<uint64_t>(&out, t.offset);
  }
  out.resize((out.size() + kAlignment - 1) / kAlignment * kAlignment, '\0');
  return out;
}

template <typename Sink>
void GgufWriter::WriteTensors(Sink&& sink) const {
  std::string buf;
  for (const Tensor& t : tensors_) {
    uint64_t padded = (t.n_bytes + kAlignment - 1) / kAlignment * kAlignment;
    buf.assign(padded, '\0');
    if (t.fill) {
      t.fill(reinterpret_cast<uint8_t*>(buf.data()), t.n_bytes);
    } else {
      std::memcpy(buf.data(), t.bytes.data(), t.n_bytes);
    }
    sink(buf);
  }
}

std::string GgufWriter::Serialize() const {
  std::string out = SerializeHeader();
  WriteTensors([&](const std::string& b) { out += b; });
  return out;
}

absl::Status GgufWriter::WriteFile(const std::string& path) const {
  std::string tmp = path + ".tmp";
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(tmp.c_str(), "wb"), &std::fclose);
  if (!f) return absl::InternalError(absl::StrCat("cannot create ", tmp));
  bool ok = true;
  std::string header = SerializeHeader();
  ok &= std::fwrite(header.data(), 1, header.size(), f.get()) == header.size();
  WriteTensors([&](const std::string& b) {
    ok &= std::fwrite(b.data(), 1, b.size(), f.get()) == b.size();
  });
  ok &= std::fflush(f.get()) == 0;
  f.reset();
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return absl::InternalError(absl::StrCat("cannot write ", path));
  }
  return absl::OkStatus();
}

}  // namespace kvs
