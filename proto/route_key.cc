#include "proto/route_key.h"

namespace kvs {

bool IsRouteKey(std::string_view key) {
  if (key.empty() || key.size() > kMaxRouteKeyBytes) return false;
  for (char c : key) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string_view RouteKeyOf(std::string_view id) {
  size_t start = 0;
  if (id.starts_with("ses_")) {
    start = 4;
  } else if (id.starts_with("ckpt_")) {
    start = 5;
  } else {
    return {};
  }
  // Look no further than a key's length: a huge id costs nothing.
  const std::string_view rest = id.substr(start, kMaxRouteKeyBytes + 1);
  const size_t dot = rest.find('.');
  if (dot == std::string_view::npos) return {};
  const std::string_view key = rest.substr(0, dot);
  return IsRouteKey(key) ? key : std::string_view();
}

}  // namespace kvs
