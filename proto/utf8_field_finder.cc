#include "proto/utf8_field_finder.h"

#include <cstdint>
#include <map>

#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/stubs/common.h>
#include <google/protobuf/wire_format_lite.h>

#include "absl/strings/str_cat.h"

namespace kvs {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::FileDescriptor;
using google::protobuf::io::CodedInputStream;
using google::protobuf::internal::WireFormatLite;

enum class Walk { kClean, kFound, kMalformed };

// What the parser validates: proto3 string fields (proto2 strings are not
// checked on parse).
bool ChecksUtf8(const FieldDescriptor& field) {
  return field.type() == FieldDescriptor::TYPE_STRING &&
         field.file()->syntax() == FileDescriptor::SYNTAX_PROTO3;
}

// `field` (occurrence `index` of a repeated field, -1 otherwise) within the
// message at `path` ("" at the top).
std::string FieldPath(const std::string& path, const FieldDescriptor& field, int index) {
  std::string name = field.name();
  if (index >= 0) absl::StrAppend(&name, "[", index, "]");
  return path.empty() ? name : absl::StrCat(path, ".", name);
}

std::string DescribeBadString(const std::string& path, const Descriptor& type,
                              const FieldDescriptor& field, int index) {
  if (type.options().map_entry()) {
    return absl::StrCat(path, ": a ", field.name(), " is not valid UTF-8");
  }
  return absl::StrCat(FieldPath(path, field, index), " is not valid UTF-8");
}

Walk WalkMessage(const Descriptor& type, CodedInputStream* in, const std::string& path,
                 std::string* found) {
  std::map<int, int> occurrences;  // of repeated fields, for their index
  for (;;) {
    const uint32_t tag = in->ReadTag();
    if (tag == 0) return Walk::kClean;  // the end (the caller checks it was a clean one)
    const FieldDescriptor* field = type.FindFieldByNumber(WireFormatLite::GetTagFieldNumber(tag));
    const bool delimited =
        WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
    const bool walk = field != nullptr && delimited &&
                      (ChecksUtf8(*field) || field->type() == FieldDescriptor::TYPE_MESSAGE);
    if (!walk) {
      if (!WireFormatLite::SkipField(in, tag)) return Walk::kMalformed;
      continue;
    }
    const int index = field->is_repeated() && !field->is_map() ? occurrences[field->number()]++ : -1;
    uint32_t length = 0;
    if (!in->ReadVarint32(&length)) return Walk::kMalformed;
    if (field->type() == FieldDescriptor::TYPE_STRING) {
      std::string value;
      if (length > INT32_MAX || !in->ReadString(&value, static_cast<int>(length))) {
        return Walk::kMalformed;
      }
      if (!google::protobuf::internal::IsStructurallyValidUTF8(value.data(),
                                                               static_cast<int>(value.size()))) {
        *found = DescribeBadString(path, type, *field, index);
        return Walk::kFound;
      }
      continue;
    }
    if (length > INT32_MAX || !in->IncrementRecursionDepth()) return Walk::kMalformed;
    const CodedInputStream::Limit limit = in->PushLimit(static_cast<int>(length));
    const std::string sub_path =
        type.options().map_entry() ? path : FieldPath(path, *field, index);
    Walk sub = WalkMessage(*field->message_type(), in, sub_path, found);
    if (sub == Walk::kClean && !in->ConsumedEntireMessage()) sub = Walk::kMalformed;
    in->PopLimit(limit);
    in->DecrementRecursionDepth();
    if (sub != Walk::kClean) return sub;
  }
}

}  // namespace

StringFieldWalk WalkStringFields(const Descriptor& type, google::protobuf::io::ZeroCopyInputStream* input) {
  CodedInputStream in(input);
  std::string found;
  StringFieldWalk result;
  switch (WalkMessage(type, &in, "", &found)) {
    case Walk::kFound: result.invalid_utf8 = std::move(found); break;
    case Walk::kMalformed: result.malformed = true; break;
    case Walk::kClean: break;
  }
  return result;
}

StringFieldWalk WalkStringFields(const Descriptor& type, absl::string_view bytes) {
  google::protobuf::io::ArrayInputStream input(bytes.data(), static_cast<int>(bytes.size()));
  return WalkStringFields(type, &input);
}

std::optional<std::string> FindInvalidUtf8Field(const Descriptor& type,
                                                google::protobuf::io::ZeroCopyInputStream* input) {
  return WalkStringFields(type, input).invalid_utf8;
}

std::optional<std::string> FindInvalidUtf8Field(const Descriptor& type, absl::string_view bytes) {
  return WalkStringFields(type, bytes).invalid_utf8;
}

}  // namespace kvs
