// Loads ../shared/reference/*.jsonl: what llama.cpp computed for each
// prompt (see ../shared/reference/README.md).
#ifndef KVSESSION_TESTS_REFERENCE_DATA_H_
#define KVSESSION_TESTS_REFERENCE_DATA_H_

#include <cstdint>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvs {

struct ReferenceLine {
  std::string prompt;
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> greedy_ids;
  std::string greedy_text;
  // top_logits[k]: the 8 highest (token, logit) after prompt + greedy[:k].
  std::vector<std::vector<std::pair<int32_t, float>>> top_logits;
};

inline std::string SharedDir() { return KVS_SHARED_DIR; }

inline std::vector<ReferenceLine> LoadReference(const std::string& path) {
  std::vector<ReferenceLine> lines;
  std::ifstream in(path);
  std::string text;
  while (std::getline(in, text)) {
    if (text.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(text);
    ReferenceLine r;
    r.prompt = j["prompt"].get<std::string>();
    r.prompt_ids = j["prompt_ids"].get<std::vector<int32_t>>();
    r.greedy_ids = j["greedy_ids"].get<std::vector<int32_t>>();
    r.greedy_text = j["greedy_text"].get<std::string>();
    for (const auto& step : j["top_logits"]) {
      std::vector<std::pair<int32_t, float>> top;
      for (const auto& e : step) top.emplace_back(e[0].get<int32_t>(), e[1].get<float>());
      r.top_logits.push_back(std::move(top));
    }
    lines.push_back(std::move(r));
  }
  return lines;
}

}  // namespace kvs

#endif  // KVSESSION_TESTS_REFERENCE_DATA_H_
