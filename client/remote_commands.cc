#include "client/remote_commands.h"

#include <google/protobuf/util/json_util.h>

#include <cstdio>
#include <iostream>
#include <thread>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/cli_args.h"
#include "client/cli_connection.h"
#include "client/kvsession_client.h"
#include "client/sampling_flags.h"

namespace kvs {
namespace v1 = kvsession::v1;
namespace {

using Json = nlohmann::json;

int Usage(const absl::Status& s) {
  std::cerr << "kvsession: " << s.message() << "\n";
  return 2;
}

int ServerError(const absl::Status& s) {
  std::cerr << "kvsession: " << absl::StatusCodeToString(s.code()) << ": " << s.message() << "\n";
  return 1;
}

void PrintJson(const Json& j) {
  std::cout << j.dump(-1, ' ', false, Json::error_handler_t::replace) << std::endl;
}

// A proto message as JSON with the .proto's field names.
Json ProtoJson(const google::protobuf::Message& m) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(m, &out, options);
  return Json::parse(out);
}

absl::Status SamplingFromFlags(const CliArgs& args, v1::SamplingParams* out) {
  return SamplingFlagsToProto(args, out);
}

Json UsageJson(const v1::Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens()},
          {"cached_tokens", u.cached_tokens()},
          {"generated_tokens", u.generated_tokens()},
          {"session_tokens", u.session_tokens()},
          {"tokens_dropped", u.tokens_dropped()}};
}

// --context error|slide.
absl::StatusOr<v1::ContextPolicy> ContextPolicyFlag(const CliArgs& args) {
  const std::string v = args.GetOr("context", "error");
  if (v == "error") return v1::CONTEXT_POLICY_ERROR;
  if (v == "slide") return v1::CONTEXT_POLICY_SLIDE;
  return absl::InvalidArgumentError("--context must be error or slide");
}

Json GenerateJson(const std::string& session, const GenerateResult& r) {
  Json j = {{"session", session},
            {"ids", r.ids},
            {"text", r.text},
            {"finish_reason", FinishReasonName(r.finish_reason)},
            {"usage", UsageJson(r.usage)}};
  if (!r.error_message.empty()) j["error"] = r.error_message;
  if (!r.logprobs.empty()) {
    Json lps = Json::array();
    for (const auto& lp : r.logprobs) lps.push_back(ProtoJson(lp));
    j["logprobs"] = lps;
  }
  return j;
}

struct Command {
  CliArgs args;
  std::unique_ptr<KvSessionClient> client;
  bool json = false;
};

// More branches than any server forks (it refuses the count first).
constexpr int kMaxSeededBranches = 4096;

absl::StatusOr<std::string> Required(const CliArgs& args, const std::string& flag) {
  auto v = args.Get(flag);
  if (!v || v->empty()) return absl::InvalidArgumentError(absl::StrCat("--", flag, " is required"));
  return *v;
}

absl::StatusOr<v1::GenerateRequest> GenerateRequestFrom(const CliArgs& args, const std::string& session,
                                                        int max_tokens, const v1::SamplingParams& sampling) {
  absl::StatusOr<int64_t> logprobs = args.GetInt("logprobs", 0);
  if (!logprobs.ok()) return logprobs.status();
  v1::GenerateRequest req;
  req.set_session_id(session);
  req.set_max_tokens(max_tokens);
  *req.mutable_sampling() = sampling;
  if (auto prompt = args.Get("prompt")) req.mutable_input()->set_text(*prompt);
  if (auto stop = args.Get("stop")) req.add_stop(*stop);
  req.set_top_logprobs(static_cast<int>(*logprobs));
  req.set_ignore_eos(args.Has("ignore-eos"));
  return req;
}

int Create(Command& c) {
  v1::CreateSessionRequest req;
  if (auto text = c.args.Get("text")) req.mutable_input()->set_text(*text);
  if (absl::Status s = SamplingFromFlags(c.args, req.mutable_sampling()); !s.ok()) return Usage(s);
  absl::StatusOr<v1::ContextPolicy> policy = ContextPolicyFlag(c.args);
  if (!policy.ok()) return Usage(policy.status());
  req.set_context_policy(*policy);
  if (c.args.Has("keep-tokens")) {
    absl::StatusOr<int64_t> keep = c.args.GetInt("keep-tokens", 0);
    if (!keep.ok()) return Usage(keep.status());
    req.set_keep_tokens(static_cast<int32_t>(*keep));
  }
  absl::StatusOr<v1::Session> s = c.client->CreateSession(req);
  if (!s.ok()) return ServerError(s.status());
  if (c.json) {
    PrintJson({{"session", s->id()}, {"length", s->length()}});
  } else {
    std::cout << s->id() << "\n";
  }
  return 0;
}

int Append(Command& c) {
  auto session = Required(c.args, "session");
  auto text = Required(c.args, "text");
  if (!session.ok()) return Usage(session.status());
  if (!text.ok()) return Usage(text.status());
  absl::StatusOr<v1::AppendResponse> r = c.client->Append(*session, *text);
  if (!r.ok()) return ServerError(r.status());
  if (c.json) {
    PrintJson({{"session", *session}, {"length", r->session().length()}, {"usage", UsageJson(r->usage())}});
  } else {
    std::cout << "appended " << r->usage().prompt_tokens() << " tokens (" << r->usage().cached_tokens()
              << " cached); the session holds " << r->session().length() << " tokens\n";
  }
  return 0;
}

int Generate(Command& c) {
  auto session = Required(c.args, "session");
  if (!session.ok()) return Usage(session.status());
  absl::StatusOr<int64_t> n = c.args.GetInt("n", 128);
  if (!n.ok()) return Usage(n.status());
  v1::SamplingParams sampling;
  if (absl::Status s = SamplingFromFlags(c.args, &sampling); !s.ok()) return Usage(s);
  absl::StatusOr<v1::GenerateRequest> made = GenerateRequestFrom(c.args, *session, static_cast<int>(*n), sampling);
  if (!made.ok()) return Usage(made.status());
  v1::GenerateRequest& req = *made;
  if (c.args.Has("context")) {
    absl::StatusOr<v1::ContextPolicy> policy = ContextPolicyFlag(c.args);
    if (!policy.ok()) return Usage(policy.status());
    req.set_context_policy(*policy);
  }
  absl::StatusOr<int64_t> ms = c.args.GetInt("timeout-ms", 0);
  if (!ms.ok()) return Usage(ms.status());
  std::optional<std::chrono::milliseconds> timeout;
  if (*ms > 0) timeout = std::chrono::milliseconds(*ms);
  const bool json = c.json;
  GenerateResult partial;
  absl::StatusOr<GenerateResult> r = c.client->Generate(
      req,
      [json](const v1::GenerateResponse& m) {
        if (!json && !m.text().empty()) {
          std::fwrite(m.text().data(), 1, m.text().size(), stdout);
          std::fflush(stdout);
        }
        return true;
      },
      timeout, &partial);
  if (!r.ok()) {
    if (!json) std::cout << "\n";
    return ServerError(r.status());
  }
  if (json) {
    PrintJson(GenerateJson(*session, *r));
  } else {
    std::cout << "\n";
    std::cerr << "finish_reason " << FinishReasonName(r->finish_reason) << ", "
              << r->usage.generated_tokens() << " tokens; the session holds "
              << r->usage.session_tokens() << " tokens";
    if (r->usage.tokens_dropped() > 0) std::cerr << " (" << r->usage.tokens_dropped() << " dropped)";
    std::cerr << "\n";
  }
  return 0;
}

absl::StatusOr<v1::ForkRequest> ForkRequestFrom(const CliArgs& args) {
  auto session = Required(args, "session");
  if (!session.ok()) return session.status();
  absl::StatusOr<int64_t> count = args.GetInt("count", 2);
  if (!count.ok()) return count.status();
  v1::ForkRequest req;
  req.set_session_id(*session);
  req.set_count(static_cast<int>(*count));
  if (auto seeds = args.Get("seeds")) {
    for (absl::string_view s : absl::StrSplit(*seeds, ',', absl::SkipEmpty())) {
      uint64_t seed;
      if (!absl::SimpleAtoi(s, &seed)) {
        return absl::InvalidArgumentError(absl::StrCat("--seeds: '", std::string(s), "' is not a number"));
      }
      req.add_seeds(seed);
    }
  }
  if (args.Has("at-length")) {
    absl::StatusOr<int64_t> at = args.GetInt("at-length", 0);
    if (!at.ok()) return at.status();
    req.set_at_length(static_cast<int>(*at));
  }
  return req;
}

int Fork(Command& c) {
  absl::StatusOr<v1::ForkRequest> req = ForkRequestFrom(c.args);
  if (!req.ok()) return Usage(req.status());
  absl::StatusOr<v1::ForkResponse> r = c.client->Fork(*req);
  if (!r.ok()) return ServerError(r.status());
  if (c.json) {
    Json ids = Json::array();
    for (const auto& s : r->sessions()) ids.push_back(s.id());
    PrintJson({{"sessions", ids}});
  } else {
    for (const auto& s : r->sessions()) std::cout << s.id() << "\n";
  }
  return 0;
}

int Sample(Command& c) {
  absl::StatusOr<v1::ForkRequest> fork = ForkRequestFrom(c.args);
  if (!fork.ok()) return Usage(fork.status());
  absl::StatusOr<int64_t> n = c.args.GetInt("n", 128);
  if (!n.ok()) return Usage(n.status());
  v1::SamplingParams sampling;
  if (absl::Status s = SamplingFromFlags(c.args, &sampling); !s.ok()) return Usage(s);
  // --seed S seeds the branches S, S+1, ... through Fork (where --seeds
  // does not): sent with each branch's Generate, it would reseed them all
  // alike and every branch would sample the same text.
  if (sampling.has_seed() && fork->count() <= kMaxSeededBranches) {
    for (int i = fork->seeds_size(); i < fork->count(); ++i) fork->add_seeds(sampling.seed() + i);
    sampling.clear_seed();
  }
  absl::StatusOr<v1::GenerateRequest> probe =
      GenerateRequestFrom(c.args, fork->session_id(), static_cast<int>(*n), sampling);
  if (!probe.ok()) return Usage(probe.status());
  absl::StatusOr<v1::ForkResponse> branches = c.client->Fork(*fork);
  if (!branches.ok()) return ServerError(branches.status());
  const int k = branches->sessions_size();
  std::vector<absl::StatusOr<GenerateResult>> results(k, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int i = 0; i < k; ++i) {
    threads.emplace_back([&, i] {
      v1::GenerateRequest req = *probe;
      req.set_session_id(branches->sessions(i).id());
      results[i] = c.client->Generate(req);
    });
  }
  for (std::thread& t : threads) t.join();
  int rc = 0;
  Json all = Json::array();
  for (int i = 0; i < k; ++i) {
    const std::string& id = branches->sessions(i).id();
    if (!results[i].ok()) {
      rc = ServerError(results[i].status());
      if (c.json) all.push_back({{"session", id}, {"error", std::string(results[i].status().message())}});
      continue;
    }
    if (c.json) {
      all.push_back(GenerateJson(id, *results[i]));
    } else {
      std::cout << "--- branch " << i + 1 << "/" << k << " " << id << " ("
                << FinishReasonName(results[i]->finish_reason) << ")\n"
                << results[i]->text << "\n";
    }
  }
  if (c.json) PrintJson(all);
  return rc;
}

int Truncate(Command& c) {
  auto session = Required(c.args, "session");
  if (!session.ok()) return Usage(session.status());
  if (!c.args.Has("length")) return Usage(absl::InvalidArgumentError("truncate needs --length N"));
  absl::StatusOr<int64_t> length = c.args.GetInt("length", 0);
  if (!length.ok()) return Usage(length.status());
  absl::StatusOr<v1::TruncateResponse> r = c.client->Truncate(*session, static_cast<int>(*length));
  if (!r.ok()) return ServerError(r.status());
  if (c.json) {
    PrintJson({{"session", r->session().id()},
               {"length", r->session().length()},
               {"removed_tokens", r->removed_tokens()},
               {"kv_pages", r->session().kv_pages()}});
  } else {
    std::cout << r->session().id() << " now holds " << r->session().length() << " tokens ("
              << r->removed_tokens() << " removed)\n";
  }
  return 0;
}

int Snapshot(Command& c) {
  auto session = Required(c.args, "session");
  if (!session.ok()) return Usage(session.status());
  absl::StatusOr<v1::Checkpoint> r = c.client->Snapshot(*session, c.args.GetOr("name", ""));
  if (!r.ok()) return ServerError(r.status());
  if (c.json) {
    PrintJson({{"checkpoint", r->id()}, {"session", r->session_id()}, {"name", r->name()},
               {"length", r->length()}, {"kv_pages", r->kv_pages()}, {"bytes_written", r->bytes_written()}});
  } else {
    std::cout << r->id() << "\n";
  }
  return 0;
}

int Restore(Command& c) {
  absl::StatusOr<v1::Session> r;
  if (auto ckpt = c.args.Get("checkpoint")) {
    r = c.client->RestoreCheckpoint(*ckpt);
  } else if (auto session = c.args.Get("session")) {
    r = c.client->RestoreSession(*session);
  } else {
    return Usage(absl::InvalidArgumentError("restore needs --checkpoint C or --session S"));
  }
  if (!r.ok()) return ServerError(r.status());
  if (c.json) {
    PrintJson({{"session", r->id()}, {"length", r->length()}, {"checkpoint", r->checkpoint_id()}});
  } else {
    std::cout << r->id() << "\n";
  }
  return 0;
}

int List(Command& c) {
  absl::StatusOr<std::vector<v1::Session>> all = c.client->ListAllSessions();
  if (!all.ok()) return ServerError(all.status());
  if (c.json) {
    Json list = Json::array();
    for (const auto& s : *all) list.push_back(ProtoJson(s));
    PrintJson({{"sessions", list}});
    return 0;
  }
  std::printf("%-38s %8s %6s %8s %s\n", "SESSION", "TOKENS", "STATE", "RESIDENT", "PARENT");
  for (const auto& s : *all) {
    std::printf("%-38s %8d %6s %8s %s\n", s.id().c_str(), s.length(),
                s.state() == v1::SESSION_STATE_BUSY ? "busy" : "idle", s.resident() ? "yes" : "no",
                s.parent_session_id().c_str());
  }
  return 0;
}

int Show(Command& c) {
  auto session = Required(c.args, "session");
  if (!session.ok()) return Usage(session.status());
  absl::StatusOr<v1::Session> s = c.client->GetSession(*session, c.args.Has("ids"), c.args.Has("with-text"));
  if (!s.ok()) return ServerError(s.status());
  if (c.json) {
    PrintJson(ProtoJson(*s));
  } else {
    std::cout << ProtoJson(*s).dump(2, ' ', false, Json::error_handler_t::replace) << "\n";
  }
  return 0;
}

int Remove(Command& c) {
  auto session = Required(c.args, "session");
  if (!session.ok()) return Usage(session.status());
  absl::Status s = c.client->DeleteSession(*session);
  if (!s.ok()) return ServerError(s);
  if (c.json) {
    PrintJson({{"deleted", *session}});
  } else {
    std::cout << "deleted " << *session << "\n";
  }
  return 0;
}

int Info(Command& c) {
  absl::StatusOr<v1::ServerInfo> info = c.client->GetServerInfo();
  if (!info.ok()) return ServerError(info.status());
  const int indent = c.json ? -1 : 2;
  std::cout << ProtoJson(*info).dump(indent, ' ', false, Json::error_handler_t::replace) << "\n";
  return 0;
}

}  // namespace

int RunRemoteCommand(const std::string& command, const std::vector<std::string>& argv) {
  using Handler = int (*)(Command&);
  static const std::map<std::string, Handler> handlers = {
      {"create", Create}, {"append", Append},   {"generate", Generate}, {"fork", Fork},
      {"sample", Sample}, {"snapshot", Snapshot}, {"restore", Restore}, {"ls", List},
      {"show", Show},     {"rm", Remove},       {"info", Info},         {"truncate", Truncate}};
  auto it = handlers.find(command);
  if (it == handlers.end()) return -1;
  std::set<std::string> value_flags = {"server", "session", "text",   "prompt", "n",    "count",
                                       "seeds",  "name",    "checkpoint", "stop", "logprobs",
                                       "timeout-ms", "length", "at-length", "context", "keep-tokens"};
  value_flags.insert(SamplingFlagNames().begin(), SamplingFlagNames().end());
  value_flags.insert(ConnectionValueFlags().begin(), ConnectionValueFlags().end());
  std::set<std::string> bool_flags = {"json", "ids", "with-text", "ignore-eos"};
  bool_flags.insert(ConnectionBoolFlags().begin(), ConnectionBoolFlags().end());
  absl::StatusOr<CliArgs> args = CliArgs::Parse(argv, value_flags, bool_flags);
  if (!args.ok()) return Usage(args.status());
  Command c{*std::move(args), nullptr, false};
  c.json = c.args.Has("json");
  absl::StatusOr<std::unique_ptr<KvSessionClient>> client = ConnectFromFlags(c.args);
  if (!client.ok()) return Usage(client.status());
  c.client = *std::move(client);
  return it->second(c);
}

}  // namespace kvs
