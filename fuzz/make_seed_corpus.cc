// Writes the seed corpora in fuzz/corpus/<target>/ (run by hand after a
// format change; the outputs are committed):
//   make_seed_corpus <repo>/fuzz/corpus
// Each seed is a small valid input, so the fuzzers start past the magic
// numbers and checksums.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cache/page_codec.h"
#include "cache/session_record.pb.h"
#include "cache/record_validation.h"
#include "kvsession/v1/kvsession.pb.h"
#include "model/gguf_writer.h"
#include "tools/model_synth.h"

namespace {

void Write(const std::filesystem::path& dir, const std::string& name, const std::string& bytes) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << bytes;
}

std::string TinyGguf() {
  kvs::GgufWriter w;
  w.AddString("general.architecture", "llama");
  w.AddUint32("llama.block_count", 1);
  w.AddInt32("test.int", -3);
  w.AddUint64("test.u64", 1ull << 40);
  w.AddFloat32("test.float", 0.5f);
  w.AddBool("test.bool", true);
  w.AddStringArray("tokenizer.ggml.tokens", {"<unk>", "<s>", "a", "b"});
  w.AddFloat32Array("tokenizer.ggml.scores", {0, 0, -1, -2});
  w.AddInt32Array("tokenizer.ggml.token_type", {2, 3, 1, 1});
  w.AddTensor("f32", kvs::GgmlType::kF32, {4, 2}, std::string(32, '\1'));
  w.AddTensor("q8", kvs::GgmlType::kQ8_0, {32, 1},
              std::string(kvs::GgufWriter::TensorBytes(kvs::GgmlType::kQ8_0, {32, 1}), '\2'));
  return w.Serialize();
}

// service_requests: byte 0 is the method's index in the service, the rest
// a valid request naming the fuzzer's placeholder session and checkpoint
// (see service_requests_fuzz.cc); bit 7 of byte 0: no request message.
void WriteServiceRequests(const std::filesystem::path& dir) {
  namespace v1 = kvsession::v1;
  const std::string session = "ses_" + std::string(32, 'S');
  const std::string checkpoint = "ckpt_" + std::string(32, 'C');
  auto write = [&](const std::string& name, int method, const google::protobuf::Message& m) {
    Write(dir, name, std::string(1, static_cast<char>(method)) + m.SerializeAsString());
  };
  v1::CreateSessionRequest create;
  create.mutable_input()->set_text("Hello there");
  create.mutable_sampling()->set_temperature(0);
  (*create.mutable_labels())["user"] = "fuzz";
  write("create", 0, create);
  v1::AppendRequest append;
  append.set_session_id(session);
  append.mutable_input()->set_text(" and then");
  write("append_text", 1, append);
  append.mutable_input()->mutable_tokens()->add_ids(5);
  append.mutable_input()->mutable_tokens()->add_ids(200);
  write("append_tokens", 1, append);
  v1::GenerateRequest generate;
  generate.set_session_id(session);
  generate.set_max_tokens(4);
  generate.add_stop("\n");
  generate.set_top_logprobs(2);
  generate.mutable_sampling()->set_seed(7);
  generate.mutable_input()->set_text(" so");
  write("generate", 2, generate);
  v1::ForkRequest fork;
  fork.set_session_id(session);
  fork.set_count(2);
  fork.add_seeds(1);
  (*fork.mutable_labels())["branch"] = "a";
  write("fork", 3, fork);
  v1::SnapshotRequest snapshot;
  snapshot.set_session_id(session);
  snapshot.set_name("snap");
  write("snapshot", 4, snapshot);
  v1::RestoreRequest restore;
  restore.set_checkpoint_id(checkpoint);
  (*restore.mutable_labels())["from"] = "checkpoint";
  write("restore_checkpoint", 5, restore);
  restore.Clear();
  restore.set_session_id(session);
  write("restore_session", 5, restore);
  v1::GetSessionRequest get;
  get.set_session_id(session);
  get.set_include_token_ids(true);
  get.set_include_text(true);
  write("get_session", 6, get);
  v1::ListSessionsRequest list;
  list.set_page_size(2);
  write("list_sessions", 7, list);
  v1::DeleteSessionRequest del;
  del.set_session_id(session);
  write("delete_session", 8, del);
  v1::ListCheckpointsRequest list_cps;
  list_cps.set_session_id(session);
  list_cps.set_page_size(5);
  write("list_checkpoints", 9, list_cps);
  v1::DeleteCheckpointRequest del_cp;
  del_cp.set_checkpoint_id(checkpoint);
  write("delete_checkpoint", 10, del_cp);
  write("get_server_info", 11, v1::GetServerInfoRequest());
  v1::TruncateRequest truncate;
  truncate.set_session_id(session);
  truncate.set_length(3);
  write("truncate", 12, truncate);
  v1::TokenizeRequest tokenize;
  tokenize.mutable_input()->set_text("Hello <s> there");
  tokenize.mutable_input()->set_parse_special(true);
  tokenize.set_session_id(session);
  write("tokenize", 13, tokenize);
  v1::DetokenizeRequest detokenize;
  for (int id : {1, 72, 200, 2}) detokenize.add_token_ids(id);
  detokenize.set_include_special(true);
  write("detokenize", 14, detokenize);
  Write(dir, "generate_without_message", std::string(1, static_cast<char>(0x80 | 2)));
}

// session_import: a control byte (the harness sets the fingerprint, the
// geometry, a new id and the page hashes; see session_import_fuzz.cc),
// then a record of the fuzz server's byte vocabulary (ids < 256, context
// 128): a plain session, a chat with an open turn, a slid session, and
// one with sampling defaults, imported by an admin (control 0); the plain
// session and the chat also imported by tenant acme (0x10), the plain one
// of tenant beta by acme (0x20, refused) and of acme by an admin (0x30),
// and as checkpoints (0x40, 0x50).
void WriteSessionImports(const std::filesystem::path& dir) {
  auto write = [&](const std::string& name, const kvs::SessionRecord& r, char control = '\0') {
    Write(dir, name, std::string(1, control) + r.SerializeAsString());
  };
  kvs::SessionRecord plain;
  for (int t = 0; t < 40; ++t) plain.add_tokens(65 + t % 26);
  // The defaults a server writes (model/sampler.h SamplingParams), greedy.
  kvs::SamplingRecord* sampling = plain.mutable_sampling();
  sampling->set_temperature(0);
  sampling->set_top_k(40);
  sampling->set_top_p(0.95f);
  sampling->set_min_p(0.05f);
  sampling->set_repetition_penalty(1);
  sampling->set_repetition_last_n(64);
  plain.set_kv_length(39);
  plain.set_create_time_us(1700000000000000);
  plain.set_update_time_us(1700000000000000);
  plain.set_version(3);
  write("plain", plain);
  kvs::SessionRecord chat = plain;
  chat.set_chat(true);
  chat.set_chat_turn_open(true);
  write("chat_turn_open", chat);
  write("plain_by_its_tenant", plain, '\x10');
  write("chat_by_its_tenant", chat, '\x10');
  write("plain_of_another_tenant", plain, '\x20');
  write("plain_of_a_tenant_by_an_admin", plain, '\x30');
  write("plain_checkpoint", plain, '\x40');
  write("chat_checkpoint_by_its_tenant", chat, '\x50');
  kvs::SessionRecord slid = plain;
  slid.set_context_policy(1);
  slid.set_keep_tokens(16);
  slid.set_tokens_dropped(64);
  slid.set_slide_salt(std::string(16, '\x5a'));
  slid.set_slide_salt_page(1);
  write("slid", slid);
  kvs::SessionRecord sampled = plain;
  sampled.mutable_sampling()->set_temperature(0.8f);
  sampled.mutable_sampling()->set_top_k(5);
  sampled.mutable_sampling()->set_top_p(0.9f);
  sampled.mutable_sampling()->set_repetition_penalty(1.1f);
  sampled.mutable_sampling()->set_repetition_last_n(16);
  (*sampled.mutable_sampling()->mutable_logit_bias())[66] = 5.0f;
  for (uint64_t w : {1u, 2u, 3u, 4u}) sampled.add_rng_state(w);
  write("sampled", sampled);
}

// Tiny models the loader accepts: llama (F32, Q8_0) and qwen3 (F16, QK
// norms, heads x head_dim != dim), each a few tens of KB.
void WriteModels(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  struct Seed {
    const char* name;
    const char* arch;
    kvs::GgmlType type;
    int head_dim;
  };
  for (const Seed& s : {Seed{"llama_f32.gguf", "llama", kvs::GgmlType::kF32, 0},
                        Seed{"llama_q8_0.gguf", "llama", kvs::GgmlType::kQ8_0, 0},
                        Seed{"qwen3_f16.gguf", "qwen3", kvs::GgmlType::kF16, 32}}) {
    kvs::SynthSpec spec;
    spec.arch = s.arch;
    spec.n_layers = 1;
    spec.dim = 32;
    spec.n_heads = 2;
    spec.n_kv_heads = 1;
    spec.head_dim = s.head_dim;
    spec.ffn_dim = 32;
    spec.vocab_size = 64;
    spec.context_length = 16;
    spec.weight_type = s.type;
    const absl::Status st = kvs::WriteSynthModel(spec, (dir / s.name).string());
    if (!st.ok()) std::fprintf(stderr, "%s: %s\n", s.name, std::string(st.message()).c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <repo>/fuzz/corpus\n", argv[0]);
    return 2;
  }
  const std::filesystem::path root = argv[1];

  Write(root / "gguf_file", "tiny.gguf", TinyGguf());
  WriteServiceRequests(root / "service_requests");
  WriteModels(root / "model_load");

  const char* texts[] = {"Hello world", " leading space and  two", "naïve café 日本語 🙂",
                         "<|im_start|>user\nhi<|im_end|>", "line\r\nbreak\ttab 12345"};
  for (int i = 0; i < 5; ++i) {
    for (char mode : {'\x00', '\x31', '\x62', '\x73'}) {
      Write(root / "tokenizer", "text" + std::to_string(i) + "_" + std::to_string(int(mode)),
            std::string(1, mode) + texts[i]);
    }
  }

  const kvs::KvGeometry g{.n_layers = 2, .n_kv_heads = 3, .head_dim = 4, .page_tokens = 5,
                          .dtype = kvs::KvDtype::kF16};
  std::vector<uint8_t> page(g.page_bytes());
  for (size_t i = 0; i < page.size(); ++i) page[i] = static_cast<uint8_t>(i * 31);
  Write(root / "page_codec", "full_page", std::string(1, '\0') + kvs::EncodePage(g, page.data(), 5));
  Write(root / "page_codec", "partial_page",
        std::string(1, '\0') + kvs::EncodePage(g, page.data(), 2));
  Write(root / "page_codec", "roundtrip", std::string("\x01\x01\x02\x03\x34\x00\x00" "abcdefgh", 15));
  Write(root / "page_codec", "roundtrip_changed", std::string("\x01\x02\x01\x07\x2d\x11\x40xyz", 10));

  kvs::SessionRecord s;
  s.set_id("session-1");
  s.set_model_fingerprint("model-a");
  *s.mutable_geometry() = kvs::ToGeometryRecord(g);
  for (int t = 0; t < 12; ++t) s.add_tokens(100 + t);
  s.set_kv_length(11);
  (*s.mutable_labels())["user"] = "seed";
  if (!kvs::FillPageHashes(&s).ok()) return 1;
  Write(root / "session_record", "session", s.SerializeAsString());
  kvs::CheckpointRecord c;
  c.set_id("checkpoint-1");
  c.set_name("seed");
  *c.mutable_session() = s;
  Write(root / "session_record", "checkpoint", c.SerializeAsString());
  WriteSessionImports(root / "session_import");
  return 0;
}
