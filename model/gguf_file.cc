#include "model/gguf_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/bounded_quote.h"

namespace kvs {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as little-endian u32
constexpr int kMaxDims = 4;

size_t ScalarSize(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
      return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32:
      return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64:
      return 8;
    default:
      return 0;
  }
}

bool IsKnownType(uint32_t t) { return t <= static_cast<uint32_t>(GgufValueType::kFloat64); }

}  // namespace

// Bounds-checked little-endian reader over [pos, end). Every read either
// succeeds completely (returns true) or returns false and moves nothing.
class GgufFile::Cursor {
 public:
  Cursor(const uint8_t* base, size_t size) : base_(base), size_(size) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  bool Read(void* out, size_t n) {
    if (n > remaining()) return false;
    std::memcpy(out, base_ + pos_, n);
    pos_ += n;
    return true;
  }
  template <typename T>
  bool Read(T* out) {
    return Read(static_cast<void*>(out), sizeof(T));
  }
  bool Skip(size_t n) {
    if (n > remaining()) return false;
    pos_ += n;
    return true;
  }
  // A GGUF string: u64 length then that many bytes (not NUL-terminated).
  bool ReadString(std::string_view* out) {
    uint64_t len;
    if (!Read(&len) || len > remaining()) return false;
    *out = std::string_view(reinterpret_cast<const char*>(base_ + pos_), len);
    pos_ += len;
    return true;
  }
  const uint8_t* here() const { return base_ + pos_; }

 private:
  const uint8_t* base_;
  size_t size_;
  size_t pos_ = 0;
};

std::string_view GgufValueTypeName(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8: return "uint8";
    case GgufValueType::kInt8: return "int8";
    case GgufValueType::kUint16: return "uint16";
    case GgufValueType::kInt16: return "int16";
    case GgufValueType::kUint32: return "uint32";
    case GgufValueType::kInt32: return "int32";
    case GgufValueType::kFloat32: return "float32";
    case GgufValueType::kBool: return "bool";
    case GgufValueType::kString: return "string";
    case GgufValueType::kArray: return "array";
    case GgufValueType::kUint64: return "uint64";
    case GgufValueType::kInt64: return "int64";
    case GgufValueType::kFloat64: return "float64";
  }
  return "unknown";
}

std::string QuoteGgufString(std::string_view s) {
  return Quote(absl::string_view(s.data(), s.size()), /*max_bytes=*/64);  // absl's string_view is not std's here
}

std::string GgufTensor::ShapeString() const {
  std::vector<int64_t> dims(ne, ne + n_dims);
  return absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->path_ = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    std::string msg = absl::StrCat(path, ": cannot open: ", std::strerror(err));
    if (err == ENOENT) return absl::NotFoundError(msg);
    return absl::InvalidArgumentError(msg);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  file->size_ = static_cast<size_t>(st.st_size);
  if (file->size_ == 0) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": file is empty, not a GGUF file"));
  }
  void* map = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
  int map_err = errno;
  ::close(fd);
  if (map == MAP_FAILED) {
    return absl::InternalError(absl::StrCat(path, ": mmap failed: ", std::strerror(map_err)));
  }
  file->base_ = static_cast<const uint8_t*>(map);
  if (absl::Status s = file->Parse(); !s.ok()) return s;
  return file;
}

GgufFile::~GgufFile() {
  if (base_ != nullptr) ::munmap(const_cast<uint8_t*>(base_), size_);
}

absl::Status GgufFile::Error(std::string_view what) const {
  return absl::InvalidArgumentError(absl::StrCat(path_, ": invalid GGUF: ", std::string(what)));
}

absl::Status GgufFile::Parse() {
  Cursor c(base_, size_);
  uint64_t n_tensors, n_kv;
  if (absl::Status s = ParseHeader(c, &n_tensors, &n_kv); !s.ok()) return s;
  if (absl::Status s = ParseMetadata(c, n_kv); !s.ok()) return s;
  if (absl::Status s = ParseTensorInfos(c, n_tensors); !s.ok()) return s;
  return LocateTensorData(c.pos());
}

absl::Status GgufFile::ParseHeader(Cursor& c, uint64_t* n_tensors, uint64_t* n_kv) {
  uint32_t magic;
  if (!c.Read(&magic)) return Error("file too short for the GGUF magic");
  if (magic != kMagic) {
    return Error("bad magic (not a GGUF file)");
  }
  if (!c.Read(&version_)) return Error("truncated in the header (version)");
  if (version_ != 2 && version_ != 3) {
    if (version_ == 1) return Error("GGUF version 1 is not supported (re-convert the model)");
    return Error(absl::StrCat("unsupported version ", version_,
                              (version_ > 0xffff ? " (a big-endian file?)" : "")));
  }
  if (!c.Read(n_tensors) || !c.Read(n_kv)) return Error("truncated in the header (counts)");
  // Every key/value needs at least 12 bytes (key length + type); every
  // tensor info at least 24 (name length + n_dims + type + offset). Counts
  // that cannot fit are rejected before anything is allocated for them.
  if (*n_kv > c.remaining() / 12) {
    return Error(absl::StrCat("metadata count ", *n_kv, " exceeds what the file can hold"));
  }
  if (*n_tensors > c.remaining() / 24) {
    return Error(absl::StrCat("tensor count ", *n_tensors, " exceeds what the file can hold"));
  }
  return absl::OkStatus();
}

absl::Status GgufFile::ParseMetadata(Cursor& c, uint64_t n_kv) {
  metadata_.reserve(n_kv);
  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string_view key;
    if (!c.ReadString(&key)) {
      return Error(absl::StrCat("truncated in metadata key #", k, " at offset ", c.pos()));
    }
    if (key.empty()) return Error(absl::StrCat("metadata key #", k, " is empty"));
    uint32_t raw_type;
    if (!c.Read(&raw_type)) return Error(absl::StrCat("truncated in the type of key ", QuoteGgufString(key)));
    if (!IsKnownType(raw_type)) {
      return Error(absl::StrCat("key ", QuoteGgufString(key), " has unknown value type ", raw_type));
    }
    GgufValue v;
    v.type = static_cast<GgufValueType>(raw_type);
    if (absl::Status s = ParseMetadataValue(c, key, &v); !s.ok()) return s;
    if (!metadata_index_.emplace(key, metadata_.size()).second) {
      return Error(absl::StrCat("duplicate metadata key ", QuoteGgufString(key)));
    }
    metadata_.emplace_back(key, std::move(v));
  }

  if (const GgufValue* a = Find("general.alignment")) {
    if (a->type != GgufValueType::kUint32 || a->u == 0 || (a->u & (a->u - 1)) != 0) {
      return Error("general.alignment must be a power-of-two uint32");
    }
    alignment_ = a->u;
  }
  return absl::OkStatus();
}

absl::Status GgufFile::ParseMetadataValue(Cursor& c, std::string_view key, GgufValue* out) {
  GgufValue& v = *out;
  auto truncated = [&] {
    return Error(absl::StrCat("truncated in the value of key ", QuoteGgufString(key), " at offset ", c.pos()));
  };
  switch (v.type) {
    case GgufValueType::kString:
      if (!c.ReadString(&v.str)) return truncated();
      break;
    case GgufValueType::kArray: {
      uint32_t et;
      if (!c.Read(&et) || !c.Read(&v.count)) return truncated();
      if (!IsKnownType(et)) {
        return Error(absl::StrCat("key ", QuoteGgufString(key), " is an array of unknown type ", et));
      }
      v.elem_type = static_cast<GgufValueType>(et);
      if (v.elem_type == GgufValueType::kArray) {
        return Error(absl::StrCat("key ", QuoteGgufString(key), " is a nested array (not supported)"));
      }
      v.elems = c.here();
      if (v.elem_type == GgufValueType::kString) {
        if (v.count > c.remaining() / 8) {
          return Error(absl::StrCat("key ", QuoteGgufString(key), " declares ", v.count,
                                    " strings, more than the file can hold"));
        }
        v.strings.resize(v.count);
        for (uint64_t j = 0; j < v.count; ++j) {
          if (!c.ReadString(&v.strings[j])) {
            return Error(absl::StrCat("truncated in string #", j, " of array ", QuoteGgufString(key)));
          }
        }
      } else {
        size_t es = ScalarSize(v.elem_type);
        if (v.count > c.remaining() / es) {
          return Error(absl::StrCat("array ", QuoteGgufString(key), " of ", v.count, " elements of ",
                                    std::string(GgufValueTypeName(v.elem_type)), " runs past the end of the file"));
        }
        c.Skip(v.count * es);
      }
      break;
    }
    default: {
      uint8_t buf[8] = {};
      size_t n = ScalarSize(v.type);
      if (!c.Read(buf, n)) return truncated();
      switch (v.type) {
        case GgufValueType::kUint8: v.u = buf[0]; break;
        case GgufValueType::kInt8: v.i = static_cast<int8_t>(buf[0]); break;
        case GgufValueType::kBool:
          if (buf[0] > 1) return Error(absl::StrCat("key ", QuoteGgufString(key), " has bool value ", buf[0]));
          v.b = buf[0] != 0;
          break;
        case GgufValueType::kUint16: { uint16_t x; std::memcpy(&x, buf, 2); v.u = x; break; }
        case GgufValueType::kInt16: { int16_t x; std::memcpy(&x, buf, 2); v.i = x; break; }
        case GgufValueType::kUint32: { uint32_t x; std::memcpy(&x, buf, 4); v.u = x; break; }
        case GgufValueType::kInt32: { int32_t x; std::memcpy(&x, buf, 4); v.i = x; break; }
        case GgufValueType::kFloat32: { float x; std::memcpy(&x, buf, 4); v.f = x; break; }
        case GgufValueType::kUint64: std::memcpy(&v.u, buf, 8); break;
        case GgufValueType::kInt64: std::memcpy(&v.i, buf, 8); break;
        case GgufValueType::kFloat64: std::memcpy(&v.f, buf, 8); break;
        default: break;
      }
    }
  }
  return absl::OkStatus();
}

absl::Status GgufFile::ParseTensorInfos(Cursor& c, uint64_t n_tensors) {
  tensors_.reserve(n_tensors);
  for (uint64_t t = 0; t < n_tensors; ++t) {
    GgufTensor ti;
    std::string_view name;
    if (!c.ReadString(&name)) return Error(absl::StrCat("truncated in the name of tensor #", t));
    if (name.empty()) return Error(absl::StrCat("tensor #", t, " has an empty name"));
    ti.name = std::string(name);
    uint32_t n_dims;
    if (!c.Read(&n_dims)) return Error(absl::StrCat("truncated in tensor ", QuoteGgufString(name)));
    if (n_dims == 0 || n_dims > kMaxDims) {
      return Error(absl::StrCat("tensor ", QuoteGgufString(name), " has ", n_dims, " dimensions (1 to 4 allowed)"));
    }
    ti.n_dims = static_cast<int>(n_dims);
    uint64_t n_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t dim;
      if (!c.Read(&dim)) return Error(absl::StrCat("truncated in the shape of tensor ", QuoteGgufString(name)));
      if (dim == 0 || dim > static_cast<uint64_t>(INT64_MAX)) {
        return Error(absl::StrCat("tensor ", QuoteGgufString(name), " has invalid dimension ", d, " = ", dim));
      }
      if (n_elements > static_cast<uint64_t>(INT64_MAX) / dim) {
        return Error(absl::StrCat("tensor ", QuoteGgufString(name), " element count overflows"));
      }
      n_elements *= dim;
      ti.ne[d] = static_cast<int64_t>(dim);
    }
    ti.n_elements = n_elements;
    if (!c.Read(&ti.type) || !c.Read(&ti.offset)) {
      return Error(absl::StrCat("truncated in tensor ", QuoteGgufString(name)));
    }
    GgmlTypeTraits traits = GgmlTraits(ti.type);
    if (traits.name.empty()) {
      return Error(absl::StrCat("tensor ", QuoteGgufString(name), " has unknown ggml type ", ti.type));
    }
    if (ti.ne[0] % traits.block_elems != 0) {
      return Error(absl::StrCat("tensor ", QuoteGgufString(name), " row length ", ti.ne[0],
                                " is not a multiple of the ", std::string(traits.name), " block size ",
                                traits.block_elems));
    }
    uint64_t n_blocks = n_elements / traits.block_elems;
    if (n_blocks > UINT64_MAX / traits.block_bytes) {
      return Error(absl::StrCat("tensor ", QuoteGgufString(name), " byte size overflows"));
    }
    ti.n_bytes = n_blocks * traits.block_bytes;
    if (ti.offset % alignment_ != 0) {
      return Error(absl::StrCat("tensor ", QuoteGgufString(name), " offset ", ti.offset,
                                " is not aligned to ", alignment_));
    }
    if (!tensor_index_.emplace(ti.name, tensors_.size()).second) {
      return Error(absl::StrCat("duplicate tensor name ", QuoteGgufString(name)));
    }
    tensors_.push_back(std::move(ti));
  }
  return absl::OkStatus();
}

absl::Status GgufFile::LocateTensorData(size_t infos_end) {
  // The data section starts at the next multiple of the alignment.
  uint64_t data_offset = (infos_end + alignment_ - 1) / alignment_ * alignment_;
  if (!tensors_.empty() && data_offset > size_) {
    return Error(absl::StrCat("truncated before the tensor data (file has ", size_,
                              " bytes, data starts at ", data_offset, ")"));
  }
  data_offset_ = std::min<uint64_t>(data_offset, size_);
  uint64_t data_size = size_ - data_offset_;
  for (GgufTensor& ti : tensors_) {
    if (ti.offset > data_size || ti.n_bytes > data_size - ti.offset) {
      return Error(absl::StrCat("tensor ", QuoteGgufString(ti.name), " (", ti.n_bytes, " bytes at data offset ",
                                ti.offset, ") extends past the end of the file (data section has ",
                                data_size, " bytes)"));
    }
    ti.data = base_ + data_offset_ + ti.offset;
  }
  // Tensors must not overlap: sort their ranges and compare neighbours.
  std::vector<const GgufTensor*> by_offset;
  by_offset.reserve(tensors_.size());
  for (const GgufTensor& ti : tensors_) by_offset.push_back(&ti);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensor* a, const GgufTensor* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const GgufTensor* prev = by_offset[i - 1];
    if (prev->offset + prev->n_bytes > by_offset[i]->offset) {
      return Error(absl::StrCat("tensors ", QuoteGgufString(prev->name), " and ", QuoteGgufString(by_offset[i]->name),
                                " overlap"));
    }
  }
  return absl::OkStatus();
}

const GgufValue* GgufFile::Find(std::string_view key) const {
  auto it = metadata_index_.find(key);
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].second;
}

const GgufTensor* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

bool IsUnsigned(GgufValueType t) {
  return t == GgufValueType::kUint8 || t == GgufValueType::kUint16 ||
         t == GgufValueType::kUint32 || t == GgufValueType::kUint64;
}
bool IsSigned(GgufValueType t) {
  return t == GgufValueType::kInt8 || t == GgufValueType::kInt16 ||
         t == GgufValueType::kInt32 || t == GgufValueType::kInt64;
}

absl::Status TypeError(const std::string& path, std::string_view key, const GgufValue& v,
                       std::string_view wanted) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": metadata ", QuoteGgufString(key), " is ",
                                                 std::string(GgufValueTypeName(v.type)), ", expected ",
                                                 std::string(wanted)));
}

absl::Status Missing(const std::string& path, std::string_view key) {
  return absl::NotFoundError(absl::StrCat(path, ": metadata ", QuoteGgufString(key), " is missing"));
}

}  // namespace

absl::StatusOr<uint64_t> GgufFile::GetUint(std::string_view key,
                                           std::optional<uint64_t> fallback) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) {
    if (fallback) return *fallback;
    return Missing(path_, key);
  }
  if (IsUnsigned(v->type)) return v->u;
  if (IsSigned(v->type) && v->i >= 0) return static_cast<uint64_t>(v->i);
  return TypeError(path_, key, *v, "a non-negative integer");
}

absl::StatusOr<int64_t> GgufFile::GetInt(std::string_view key,
                                         std::optional<int64_t> fallback) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) {
    if (fallback) return *fallback;
    return Missing(path_, key);
  }
  if (IsSigned(v->type)) return v->i;
  if (IsUnsigned(v->type) && v->u <= static_cast<uint64_t>(INT64_MAX)) {
    return static_cast<int64_t>(v->u);
  }
  return TypeError(path_, key, *v, "an integer");
}

absl::StatusOr<double> GgufFile::GetFloat(std::string_view key,
                                          std::optional<double> fallback) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) {
    if (fallback) return *fallback;
    return Missing(path_, key);
  }
  if (v->type == GgufValueType::kFloat32 || v->type == GgufValueType::kFloat64) return v->f;
  if (IsUnsigned(v->type)) return static_cast<double>(v->u);
  if (IsSigned(v->type)) return static_cast<double>(v->i);
  return TypeError(path_, key, *v, "a number");
}

absl::StatusOr<bool> GgufFile::GetBool(std::string_view key, std::optional<bool> fallback) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) {
    if (fallback) return *fallback;
    return Missing(path_, key);
  }
  if (v->type == GgufValueType::kBool) return v->b;
  return TypeError(path_, key, *v, "a bool");
}

absl::StatusOr<std::string_view> GgufFile::GetString(
    std::string_view key, std::optional<std::string_view> fallback) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) {
    if (fallback) return *fallback;
    return Missing(path_, key);
  }
  if (v->type == GgufValueType::kString) return v->str;
  return TypeError(path_, key, *v, "a string");
}

absl::StatusOr<const std::vector<std::string_view>*> GgufFile::GetStringArray(
    std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(path_, key);
  if (v->type != GgufValueType::kArray || v->elem_type != GgufValueType::kString) {
    return TypeError(path_, key, *v, "an array of strings");
  }
  return &v->strings;
}

absl::StatusOr<std::vector<float>> GgufFile::GetFloatArray(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(path_, key);
  if (v->type != GgufValueType::kArray ||
      (v->elem_type != GgufValueType::kFloat32 && v->elem_type != GgufValueType::kFloat64)) {
    return TypeError(path_, key, *v, "an array of floats");
  }
  std::vector<float> out(v->count);
  for (uint64_t j = 0; j < v->count; ++j) {
    if (v->elem_type == GgufValueType::kFloat32) {
      std::memcpy(&out[j], v->elems + 4 * j, 4);
    } else {
      double d;
      std::memcpy(&d, v->elems + 8 * j, 8);
      out[j] = static_cast<float>(d);
    }
  }
  return out;
}

absl::StatusOr<std::vector<int64_t>> GgufFile::GetIntArray(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return Missing(path_, key);
  if (v->type != GgufValueType::kArray ||
      !(IsSigned(v->elem_type) || IsUnsigned(v->elem_type))) {
    return TypeError(path_, key, *v, "an array of integers");
  }
  size_t es = ScalarSize(v->elem_type);
  std::vector<int64_t> out(v->count);
  for (uint64_t j = 0; j < v->count; ++j) {
    const uint8_t* p = v->elems + es * j;
    switch (v->elem_type) {
      case GgufValueType::kUint8: out[j] = p[0]; break;
      case GgufValueType::kInt8: out[j] = static_cast<int8_t>(p[0]); break;
      case GgufValueType::kUint16: { uint16_t x; std::memcpy(&x, p, 2); out[j] = x; break; }
      case GgufValueType::kInt16: { int16_t x; std::memcpy(&x, p, 2); out[j] = x; break; }
      case GgufValueType::kUint32: { uint32_t x; std::memcpy(&x, p, 4); out[j] = x; break; }
      case GgufValueType::kInt32: { int32_t x; std::memcpy(&x, p, 4); out[j] = x; break; }
      case GgufValueType::kUint64: {
        uint64_t x;
        std::memcpy(&x, p, 8);
        if (x > static_cast<uint64_t>(INT64_MAX)) {
          return absl::InvalidArgumentError(
              absl::StrCat(path_, ": array ", QuoteGgufString(key), " element ", j, " out of range"));
        }
        out[j] = static_cast<int64_t>(x);
        break;
      }
      case GgufValueType::kInt64: std::memcpy(&out[j], p, 8); break;
      default: break;
    }
  }
  return out;
}

}  // namespace kvs
