// kvsessiond: the kvsession server.
//
//   kvsessiond --model M.gguf --listen 127.0.0.1:50051 --data-dir DIR
//       [--threads N --kv-type f16|bf16|q8_0|f32 --page-tokens 16 --kv-cache-mb 2048
//        --max-sessions N --max-context N --max-batch-tokens 512 ...]
//
// Loads the model, opens (or creates) the session store in --data-dir,
// serves kvsession.v1.KvSession plus grpc.health.v1.Health and server
// reflection (and, with --metrics-listen, Prometheus metrics, /healthz and
// /readyz over HTTP: service/metrics_http_server.h), and shuts down gracefully on SIGTERM / SIGINT: running
// generations are cancelled (their tokens stay in their sessions), every
// session is persisted, and the process exits 0. SIGHUP re-reads
// --auth-keys, keys and per-tenant quotas (a bad file keeps the old ones,
// and says so).
//
// Security (docs/operations.md, "Secure deployment"): --tls-cert/--tls-key
// serve TLS, --tls-client-ca requires client certificates (mutual TLS);
// --auth-keys FILE requires `authorization: Bearer KEY` on every call.
// Without --auth-keys the server listens only on loopback unless
// --insecure-no-auth.
#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <memory>
#include <stop_token>
#include <thread>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/cleanup/cleanup.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "cache/session_store.h"
#include "kernels/attention.h"
#include "kernels/cpu_features.h"
#include "model/model.h"
#include "service/engine.h"
#include "service/fleet_routing.h"
#include "service/kvsession_service.h"
#include "service/metrics_http_server.h"
#include "service/metrics_registry.h"
#include "service/rpc_metrics.h"
#include "service/server_metrics.h"
#include "service/session_io_metrics.h"
#include "service/token_latency_metrics.h"
#include "service/auth/authenticator.h"
#include "service/call_audit.h"
#include "service/auth/session_ownership.h"
#include "service/auth/tenant_quotas.h"
#include "service/tenant_metrics.h"
#include "service/tenant_usage.h"
#include "service/model_fingerprint.h"
#include "service/server_security.h"
#include "service/session_expiry.h"
#include "service/session_manager.h"
#include "service/task_executor.h"
#include "service/transport_options.h"

ABSL_FLAG(std::string, model, "", "GGUF model file (required)");
ABSL_FLAG(std::string, listen, "127.0.0.1:50051", "address to serve on (host:port; port 0 picks one)");
ABSL_FLAG(std::string, data_dir, "", "directory of the session store (required; created if missing)");
ABSL_FLAG(std::string, port_file, "", "write the bound port to this file once serving");
ABSL_FLAG(int, threads, 0, "compute threads (0: one per core)");
ABSL_FLAG(int, io_threads, 2,
          "threads for requests' disk I/O (KV loads, fork, snapshot), and as many for persisting "
          "finished jobs and writing a prefill's pages as they fill");
ABSL_FLAG(std::string, kv_type, "f16",
          "KV cache element type, in RAM and on disk: f16, bf16, "
          "q8_0 (half of f16's bytes; head_dim a multiple of 32) or f32");
ABSL_FLAG(int, page_tokens, 16, "tokens per KV page");
ABSL_FLAG(int, kv_cache_mb, 2048, "KV cache memory budget in MiB");
ABSL_FLAG(bool, kv_prefault, false,
          "map and touch the whole KV cache at startup (it becomes resident), so restores and "
          "prefills never wait for the kernel to supply fresh memory");
ABSL_FLAG(int, kv_warm_tokens, 4096,
          "keep this many tokens of free KV pages mapped and resident ahead of use, or as many as "
          "the longest session in the store if that is more (0: map on demand), so a restore or "
          "prefill of that length never waits for the kernel to supply fresh memory; the pool is "
          "warmed before serving and refilled by a background thread");
ABSL_FLAG(int, max_sessions, 10000, "most sessions the server holds");
ABSL_FLAG(int, max_checkpoints, 100000,
          "most checkpoints the server holds (each keeps its record in RAM); Snapshot and the import of a "
          "checkpoint answer RESOURCE_EXHAUSTED past it");
ABSL_FLAG(int, max_context, 0, "most tokens per session (0: the model's context length)");
ABSL_FLAG(int, max_batch_tokens, 512, "tokens per engine step (prefill chunks + decode tokens)");
ABSL_FLAG(int, max_tokens_per_generate, 4096, "most tokens one Generate may ask for");
ABSL_FLAG(int, max_fork_count, 64, "most branches one Fork may create");
ABSL_FLAG(int, max_input_bytes, 1 << 20, "most bytes of input text per request");
ABSL_FLAG(bool, amx_attention, false,
          "fold bf16 and q8_0 KV caches' attention on AMX where the CPU has AMX-BF16 (Sapphire "
          "Rapids and later): long prompts prefill faster, decode rows run slower "
          "(docs/performance/sapphire-rapids.md, \"Attention on AMX\"); ignored, with a warning, elsewhere");
ABSL_FLAG(std::string, matmul, "fast",
          "matrix products: fast (activations rounded as llama.cpp does) or exact (F32)");
ABSL_FLAG(int, max_queued_jobs, 64,
          "calls that may wait for KV memory to start; beyond, RESOURCE_EXHAUSTED at once");
ABSL_FLAG(int, max_migration_mb, 2048,
          "RAM the migration streams in flight (ImportSession buffering, ExportSession until read) may "
          "hold in all; each tenant at most 1024 of it; beyond, RESOURCE_EXHAUSTED");
ABSL_FLAG(int, max_unsent_stream_kb, 4096,
          "KiB a Generate stream may hold that its client has not read; beyond, its generation "
          "stops and the call ends RESOURCE_EXHAUSTED once the client reads what was sent");
ABSL_FLAG(int, max_unsent_mb, 1024,
          "MiB all Generate streams together may hold that their clients have not read; beyond, each "
          "stream that is itself backed up stops as at --max-unsent-stream-kb");
ABSL_FLAG(int, max_concurrent_streams, 256,
          "calls one connection may have open at once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS); the "
          "client's further calls on it wait until one ends (0: no limit)");
ABSL_FLAG(int, keepalive_time_ms, 60000,
          "ping a connection after this long without reading from it; with --keepalive-timeout-ms, "
          "how soon a vanished client's calls are cancelled and what they hold is freed");
ABSL_FLAG(int, keepalive_timeout_ms, 20000, "close a connection whose ping is unanswered this long");
ABSL_FLAG(int, min_client_ping_interval_ms, 10000,
          "clients may send keepalive pings this often (also with no call open); more often gets "
          "GOAWAY too_many_pings");
ABSL_FLAG(int, max_connection_idle_ms, 0, "close a connection that has had no call this long (0: never)");
ABSL_FLAG(int, max_connection_age_ms, 0,
          "send GOAWAY to connections older than this (+-10%), so clients reconnect and spread over "
          "a fleet behind a TCP load balancer (0: never)");
ABSL_FLAG(int, max_connection_age_grace_ms, 60000,
          "after --max-connection-age-ms, calls still running get this long to end, then are cancelled");
ABSL_FLAG(int, drain_delay_ms, 0,
          "on SIGTERM, health checks answer NOT_SERVING for this long before running calls are "
          "cancelled and the server stops (lets a load balancer stop routing here first)");
ABSL_FLAG(int, min_free_disk_mb, 256,
          "refuse writes (RESOURCE_EXHAUSTED) while the data directory's file system has less free "
          "space than this; reads and deletes still work, writes resume once space is back");
ABSL_FLAG(std::string, chat_template, "",
          "chat template family for chat messages, overriding the one detected from the GGUF "
          "(chatml, qwen3, llama3, llama2, mistral, phi3, gemma, deepseek, deepseek3)");
ABSL_FLAG(std::string, metrics_listen, "",
          "serve Prometheus metrics (/metrics), /healthz and /readyz over HTTP on this address "
          "(host:port; port 0 picks one); empty: no metrics");
ABSL_FLAG(std::string, metrics_port_file, "", "write the bound metrics port to this file once serving");
ABSL_FLAG(std::string, tls_cert, "", "PEM certificate chain: serve TLS (with --tls-key)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls-cert");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA bundle: require client certificates signed by it (mutual TLS)");
ABSL_FLAG(std::string, auth_keys, "",
          "API keys file (TENANT ROLE SHA256HEX [QUOTA=VALUE ...] per line); every call must send "
          "authorization: Bearer KEY. Re-read on SIGHUP");
ABSL_FLAG(bool, insecure_no_auth, false,
          "allow listening on a non-loopback address without --auth-keys (anyone who can reach the "
          "port can use every session)");
ABSL_FLAG(bool, shared_prefix_cache, false,
          "share one public prefix cache across tenants: sessions created while set chain their page "
          "hashes unsalted, so a common prefix (a system prompt) is computed once for all tenants; any "
          "tenant can then tell from cached_tokens whether some tenant recently sent a text "
          "(docs/operations.md, Secure deployment)");
ABSL_FLAG(std::string, audit_log, "",
          "append one JSON line per mutating call (time, tenant, method, ids, status code, tokens, "
          "latency; never content or keys) to this file, or to stderr with -; empty: no audit log");
ABSL_FLAG(std::string, replica_name, "",
          "this replica's name in a fleet, sent in every response's x-kvsession-replica header and "
          "in GetServerInfo (default: the host name; docs/fleet.md)");
// Per-tenant quota defaults (service/auth/tenant_quotas.h); a tenant's
// QUOTA=VALUE fields in --auth-keys override them. "tenant-" because
// --max-sessions already bounds the whole server.
ABSL_FLAG(int64_t, tenant_max_sessions, 0, "default per-tenant quota: sessions owned (0 = unlimited)");
ABSL_FLAG(int64_t, tenant_max_kv_bytes, 0, "default per-tenant quota: resident KV bytes (0 = unlimited)");
ABSL_FLAG(int64_t, tenant_max_store_bytes, 0,
          "default per-tenant quota: bytes stored for its sessions and checkpoints (0 = unlimited)");
ABSL_FLAG(int64_t, tenant_max_generates, 0,
          "default per-tenant quota: concurrent Generate / Append calls (0 = unlimited)");
ABSL_FLAG(int64_t, tenant_max_checkpoints, 0, "default per-tenant quota: checkpoints owned (0 = unlimited)");
ABSL_FLAG(bool, sync_writes, true, "fsync the store's log on every write (durable across power loss)");
ABSL_FLAG(std::string, page_writes, "direct",
          "how KV page files are written: direct (O_DIRECT where the file system takes it; no page-cache copy) or "
          "buffered (through the page cache, which then serves a restore soon after)");
ABSL_FLAG(absl::Duration, delete_idle_sessions_after, absl::ZeroDuration(),
          "delete sessions no call has used for this long, as DeleteSession does (e.g. 720h; checkpoints stay; "
          "0: keep sessions until they are deleted)");

namespace kvs {
namespace {

constexpr char kVersion[] = "0.1.0";

int Fail(const std::string& what) {
  std::cerr << "kvsessiond: " << what << "\n";
  return 1;
}

// The validated command line.
struct ServerConfig {
  std::string model_path;
  std::string data_dir;
  std::string listen;
  KvDtype kv_dtype = KvDtype::kF16;
  int page_tokens = 16;
  MatmulPath matmul = MatmulPath::kFast;
  TransportOptions transport;
};

absl::StatusOr<ServerConfig> ReadFlags() {
  ServerConfig c;
  c.model_path = absl::GetFlag(FLAGS_model);
  c.data_dir = absl::GetFlag(FLAGS_data_dir);
  c.listen = absl::GetFlag(FLAGS_listen);
  if (c.model_path.empty()) return absl::InvalidArgumentError("--model is required");
  if (c.data_dir.empty()) return absl::InvalidArgumentError("--data-dir is required");
  const std::string kv_type = absl::GetFlag(FLAGS_kv_type);
  const std::optional<KvDtype> kv_dtype = KvDtypeFromName(kv_type);
  if (!kv_dtype) return absl::InvalidArgumentError("--kv-type must be f16, bf16, q8_0 or f32");
  c.kv_dtype = *kv_dtype;
  c.page_tokens = absl::GetFlag(FLAGS_page_tokens);
  if (c.page_tokens < 1 || c.page_tokens > 256) return absl::InvalidArgumentError("--page-tokens must be in [1, 256]");
  if (c.kv_dtype == KvDtype::kQ8_0 && c.page_tokens % 16 != 0) {
    // A q8_0 page holds its keys in packed groups of 16 (kernels/q8_0_kv_blocks.h).
    return absl::InvalidArgumentError("--page-tokens must be a multiple of 16 with --kv-type q8_0");
  }
  if (absl::GetFlag(FLAGS_max_batch_tokens) < 1) return absl::InvalidArgumentError("--max-batch-tokens must be >= 1");
  if (absl::GetFlag(FLAGS_max_unsent_stream_kb) < 1) {
    return absl::InvalidArgumentError("--max-unsent-stream-kb must be >= 1");
  }
  if (absl::GetFlag(FLAGS_max_unsent_mb) < 1) return absl::InvalidArgumentError("--max-unsent-mb must be >= 1");
  c.transport.max_concurrent_streams = absl::GetFlag(FLAGS_max_concurrent_streams);
  c.transport.keepalive_time_ms = absl::GetFlag(FLAGS_keepalive_time_ms);
  c.transport.keepalive_timeout_ms = absl::GetFlag(FLAGS_keepalive_timeout_ms);
  c.transport.min_client_ping_interval_ms = absl::GetFlag(FLAGS_min_client_ping_interval_ms);
  c.transport.max_connection_idle_ms = absl::GetFlag(FLAGS_max_connection_idle_ms);
  c.transport.max_connection_age_ms = absl::GetFlag(FLAGS_max_connection_age_ms);
  c.transport.max_connection_age_grace_ms = absl::GetFlag(FLAGS_max_connection_age_grace_ms);
  if (absl::Status s = c.transport.Validate(); !s.ok()) return s;
  if (const std::string w = c.transport.Warning(); !w.empty()) std::cerr << "kvsessiond: warning: " << w << "\n";
  if (const absl::Duration ttl = absl::GetFlag(FLAGS_delete_idle_sessions_after);
      ttl != absl::ZeroDuration() && ttl < absl::Seconds(1)) {
    return absl::InvalidArgumentError("--delete-idle-sessions-after must be 0 (never) or at least 1s");
  }
  bool matmul_ok = false;
  c.matmul = ParseMatmulPath(absl::GetFlag(FLAGS_matmul), &matmul_ok);
  if (!matmul_ok) return absl::InvalidArgumentError("--matmul must be fast or exact");
  return c;
}

ServiceLimits LimitsFromFlags(const ModelConfig& c) {
  ServiceLimits limits;
  limits.max_sessions = absl::GetFlag(FLAGS_max_sessions);
  limits.max_checkpoints = absl::GetFlag(FLAGS_max_checkpoints);
  limits.max_context = absl::GetFlag(FLAGS_max_context) > 0
                           ? std::min(absl::GetFlag(FLAGS_max_context), c.context_length)
                           : c.context_length;
  limits.max_tokens_per_generate = absl::GetFlag(FLAGS_max_tokens_per_generate);
  limits.max_fork_count = absl::GetFlag(FLAGS_max_fork_count);
  limits.max_input_bytes = absl::GetFlag(FLAGS_max_input_bytes);
  const absl::Duration ttl = absl::GetFlag(FLAGS_delete_idle_sessions_after);
  limits.idle_session_ttl = ttl < absl::InfiniteDuration() ? ttl : absl::ZeroDuration();
  return limits;
}

KvGeometry GeometryFor(const ModelConfig& c, const ServerConfig& config) {
  KvGeometry geometry;
  geometry.n_layers = c.n_layers;
  geometry.n_kv_heads = c.n_kv_heads;
  geometry.head_dim = c.head_dim;
  geometry.page_tokens = config.page_tokens;
  geometry.dtype = config.kv_dtype;
  return geometry;
}

// Blocks the shutdown signals in every thread (threads started later
// inherit the mask); WaitForShutdownSignal takes them.
sigset_t BlockShutdownSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

// Re-reads the keys file (and with it the tenants' quotas); the old keys
// and quotas stay when the new file is bad.
void ReloadKeys(Authenticator* auth, TenantQuotas* quotas) {
  if (auth == nullptr) {
    std::cerr << "kvsessiond: SIGHUP: no --auth-keys to reload" << std::endl;
    return;
  }
  absl::StatusOr<ApiKeyFile> keys = auth->Reload();
  if (keys.ok()) {
    quotas->Update(*keys);
    std::cerr << "kvsessiond: SIGHUP: reloaded " << keys->entries.size() << " API keys of "
              << keys->tenant_count() << " tenants from " << auth->path() << std::endl;
  } else {
    std::cerr << "kvsessiond: SIGHUP: keeping the previous API keys: " << keys.status().message() << std::endl;
  }
}

// Waits for SIGTERM or SIGINT, reloading the keys on each SIGHUP.
int WaitForShutdownSignal(const sigset_t& signals, Authenticator* auth, TenantQuotas* quotas) {
  while (true) {
    int sig = 0;
    sigwait(&signals, &sig);
    if (sig != SIGHUP) return sig;
    ReloadKeys(auth, quotas);
  }
}

std::unique_ptr<grpc::Server> StartServer(const std::string& listen, const TransportOptions& transport,
                                          std::shared_ptr<grpc::ServerCredentials> credentials,
                                          KvSessionService* service, const ServiceLimits& limits,
                                          RpcMetrics* rpc_metrics, CallAudit* audit,
                                          const std::string& replica, int* port) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen, std::move(credentials), port);
  builder.RegisterService(service);
  builder.SetMaxReceiveMessageSize(std::max(4 << 20, limits.max_input_bytes + (64 << 10)));
  transport.Apply(builder);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(ReplicaHeaderInterceptors(replica));
  if (rpc_metrics != nullptr) interceptors.push_back(rpc_metrics->InterceptorFactory());
  if (audit != nullptr) interceptors.push_back(audit->InterceptorFactory());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  return builder.BuildAndStart();
}

// --replica-name, or the host name.
std::string ReplicaName() {
  std::string name = absl::GetFlag(FLAGS_replica_name);
  if (!name.empty()) return name;
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) name = host;
  return name.empty() ? "kvsessiond" : name;
}

// Writes the bound port to `port_file` (--port-file, --metrics-port-file)
// atomically (tests wait for it).
void WritePortFile(const std::string& port_file, int port) {
  if (port_file.empty()) return;
  const std::string tmp = port_file + ".tmp";
  std::ofstream(tmp) << port << "\n";
  std::error_code ec;
  std::filesystem::rename(tmp, port_file, ec);
}

// Cancels running jobs and lets them persist and end their calls, then
// stops the server (idle connections get a short grace period), then the
// engine.
void Drain(grpc::Server* server, Engine* engine, MetricsHttpServer* metrics) {
  // Health checks answer NOT_SERVING (and /readyz 503) from now on (load
  // balancers stop sending new calls while the running ones end).
  server->GetHealthCheckService()->SetServingStatus(false);
  if (metrics != nullptr) metrics->SetReady(false);
  std::this_thread::sleep_for(std::chrono::milliseconds(absl::GetFlag(FLAGS_drain_delay_ms)));
  engine->CancelAll();
  engine->WaitIdle(std::chrono::seconds(10));
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  engine->Stop();
  server->Wait();
}

int Serve() {
  absl::StatusOr<ServerConfig> config = ReadFlags();
  if (!config.ok()) return Fail(std::string(config.status().message()));
  const sigset_t signals = BlockShutdownSignals();

  // Security first: a misconfiguration fails before the model loads.
  const std::string auth_keys = absl::GetFlag(FLAGS_auth_keys);
  if (absl::Status s = CheckListenPolicy(config->listen, !auth_keys.empty(), absl::GetFlag(FLAGS_insecure_no_auth));
      !s.ok()) {
    return Fail(std::string(s.message()));
  }
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = ServerCredentialsFor(
      {absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key), absl::GetFlag(FLAGS_tls_client_ca)});
  if (!credentials.ok()) return Fail(std::string(credentials.status().message()));
  TenantQuotas quotas({absl::GetFlag(FLAGS_tenant_max_sessions), absl::GetFlag(FLAGS_tenant_max_kv_bytes),
                       absl::GetFlag(FLAGS_tenant_max_store_bytes), absl::GetFlag(FLAGS_tenant_max_generates),
                       absl::GetFlag(FLAGS_tenant_max_checkpoints)});
  for (Quota q : kAllQuotas) {
    if (quotas.defaults().get(q) < 0) {
      return Fail(absl::StrCat("--tenant-", absl::StrReplaceAll(QuotaName(q), {{"_", "-"}}), " must be >= 0"));
    }
  }
  std::unique_ptr<Authenticator> authenticator;
  std::string key_summary;
  if (!auth_keys.empty()) {
    absl::StatusOr<ApiKeyFile> keys = LoadApiKeyFile(auth_keys);
    if (!keys.ok()) return Fail(std::string(keys.status().message()));
    key_summary = absl::StrCat(keys->entries.size(), " API keys of ", keys->tenant_count(), " tenants from ",
                               auth_keys);
    quotas.Update(*keys);
    authenticator = std::make_unique<Authenticator>(*std::move(keys), auth_keys);
  }

  // Metrics first, so /healthz answers (and /readyz says "not ready") while
  // the model loads.
  metrics::Registry registry;
  std::unique_ptr<MetricsHttpServer> metrics_http;
  std::unique_ptr<RpcMetrics> rpc_metrics;
  const std::string metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  if (!metrics_listen.empty()) {
    metrics_http = std::make_unique<MetricsHttpServer>(&registry);
    absl::StatusOr<int> metrics_port = metrics_http->Start(metrics_listen);
    if (!metrics_port.ok()) return Fail(std::string(metrics_port.status().message()));
    std::cerr << "kvsessiond: metrics on " << metrics_listen.substr(0, metrics_listen.rfind(':') + 1)
              << *metrics_port << std::endl;
    WritePortFile(absl::GetFlag(FLAGS_metrics_port_file), *metrics_port);
    rpc_metrics = std::make_unique<RpcMetrics>(&registry);
    EnableTokenLatencyMetrics(&registry);
  }
  // --audit-log, and per-tenant call counts when there are tenants.
  std::unique_ptr<CallAudit> audit;
  const std::string audit_log = absl::GetFlag(FLAGS_audit_log);
  if (!audit_log.empty() || (authenticator && metrics_http)) {
    absl::StatusOr<std::unique_ptr<CallAudit>> made =
        CallAudit::Create(audit_log, authenticator.get(), authenticator && metrics_http ? &registry : nullptr);
    if (!made.ok()) return Fail(std::string(made.status().message()));
    audit = *std::move(made);
  }

  // The attention arithmetic is chosen before any KV is computed.
  if (absl::GetFlag(FLAGS_amx_attention) && !UseAmxAttention(true)) {
    std::cerr << "kvsessiond: warning: --amx-attention: this CPU has no AMX-BF16 (or AVX512-BF16); "
                 "attention runs on "
              << ActiveKernelsName() << "\n";
  }
  // The model file's SHA-256 (what stored sessions are checked against) is
  // read on a thread of its own while the model loads: on a 500 MiB model
  // the hash took about 0.2 s of a 1.1-1.4 s start-up, most of the load
  // being the kernel supplying the packed weights' fresh pages, which the
  // hash's reads from the page cache do not wait on. A start that fails
  // before the hash is taken stops it (the guard, destroyed before the
  // future, whose end waits for the hashing thread).
  std::stop_source fingerprint_stop;
  std::future<absl::StatusOr<std::string>> fingerprint_read =
      std::async(std::launch::async, [path = config->model_path, stop = fingerprint_stop.get_token()] {
        return FingerprintFile(path, stop);
      });
  absl::Cleanup stop_fingerprint = [&fingerprint_stop] { fingerprint_stop.request_stop(); };
  absl::StatusOr<std::unique_ptr<Model>> model =
      Model::Load(config->model_path, {.pack_for_fast_path = config->matmul == MatmulPath::kFast});
  if (!model.ok()) return Fail(std::string(model.status().message()));
  std::cerr << "kvsessiond: " << (*model)->Summary() << "\n";
  absl::StatusOr<InputResolver> chat = InputResolver::Create(
      (*model)->gguf(), (*model)->tokenizer(), absl::GetFlag(FLAGS_chat_template), InputLimits{});
  if (!chat.ok()) return Fail(std::string(chat.status().message()));
  std::cerr << "kvsessiond: chat template: "
            << (chat->chat_family().empty() ? std::string_view("none (chat messages are refused)")
                                            : chat->chat_family())
            << "\n";
  absl::StatusOr<std::string> fingerprint = fingerprint_read.get();
  if (!fingerprint.ok()) return Fail(std::string(fingerprint.status().message()));

  std::error_code ec;
  std::filesystem::create_directories(config->data_dir, ec);
  StoreOptions store_options;
  store_options.sync_writes = absl::GetFlag(FLAGS_sync_writes);
  store_options.min_free_bytes = static_cast<int64_t>(absl::GetFlag(FLAGS_min_free_disk_mb)) << 20;
  if (const std::string writes = absl::GetFlag(FLAGS_page_writes); writes == "buffered") {
    store_options.page_writes = PageWrites::kBuffered;
  } else if (writes != "direct") {
    return Fail("--page-writes must be direct or buffered");
  }
  absl::StatusOr<std::unique_ptr<SessionStore>> store = SessionStore::Open(config->data_dir, store_options);
  if (!store.ok()) {
    return Fail(absl::StrCat("cannot open the store in ", config->data_dir, ": ", store.status().message()));
  }

  const ModelConfig& c = (*model)->config();
  const ServiceLimits limits = LimitsFromFlags(c);
  const KvGeometry geometry = GeometryFor(c, *config);
  if (!KvDtypeFitsHeadDim(geometry.dtype, geometry.head_dim)) {
    return Fail(absl::StrCat("--kv-type ", KvDtypeName(geometry.dtype),
                             " needs a head_dim that is a multiple of 32 and at most ", kKvQ8_0MaxHeadDim, "; ", c.name,
                             " has head_dim ", geometry.head_dim));
  }
  const int64_t kv_bytes = static_cast<int64_t>(absl::GetFlag(FLAGS_kv_cache_mb)) << 20;
  const int64_t max_pages = std::max<int64_t>(0, kv_bytes) / geometry.page_bytes();
  // One session of the full context (plus a copy-on-write page) must fit.
  const int64_t session_pages = (limits.max_context + geometry.page_tokens - 1) / geometry.page_tokens + 1;
  if (max_pages < session_pages) {
    return Fail(absl::StrCat(
        "--kv-cache-mb ", absl::GetFlag(FLAGS_kv_cache_mb), " holds ", max_pages, " KV pages of ",
        geometry.page_bytes(), " bytes; one session of the full context (", limits.max_context,
        " tokens / ", geometry.page_tokens, " per page + 1) needs ", session_pages, " pages = ",
        (session_pages * geometry.page_bytes() + (1 << 20) - 1) >> 20,
        " MiB: raise --kv-cache-mb or lower --max-context"));
  }
  const int warm_tokens = absl::GetFlag(FLAGS_kv_warm_tokens);
  if (warm_tokens < 0) return Fail("--kv-warm-tokens must be 0 or more");
  PagePool pool(geometry, max_pages);
  if (metrics_http) EnableSessionIoMetrics(&registry, geometry.page_bytes());

  // Requests (which may wait for a busy session) and job completions
  // (persist, release, answer) run on separate threads, so a waiting
  // request can never hold up the release it waits for.
  TaskExecutor io(absl::GetFlag(FLAGS_io_threads));
  TaskExecutor completions(absl::GetFlag(FLAGS_io_threads));
  SessionManager sessions(**model, &pool, store->get(), *fingerprint, limits);
  if (absl::Status s = sessions.LoadFromStore(); !s.ok()) return Fail(std::string(s.message()));
  // A cold restore's direct reads land in buffers mapped now, not then.
  (*store)->PrepareDirectReads(geometry);
  // The pool is warmed once the store's sessions are known: the longest one
  // restores without waiting for fresh memory too (at most the whole pool).
  int64_t warm_pages = 0;
  if (absl::GetFlag(FLAGS_kv_prefault)) {
    if (absl::Status s = pool.Prefault(); !s.ok()) {
      return Fail(absl::StrCat("--kv-prefault: ", s.message()));
    }
    warm_pages = max_pages;
  } else if (warm_tokens > 0) {
    const int64_t target_tokens = std::max<int64_t>(warm_tokens, sessions.longest_stored_session_tokens());
    warm_pages = std::min(max_pages, (target_tokens + geometry.page_tokens - 1) / geometry.page_tokens);
    if (absl::Status s = pool.KeepWarm(warm_pages); !s.ok()) {
      return Fail(absl::StrCat("--kv-warm-tokens ", warm_tokens, ": ", s.message()));
    }
  }
  sessions.SetSharedPrefixCache(absl::GetFlag(FLAGS_shared_prefix_cache));
  // Idle sessions expire once the server serves (session_expiry.h), those
  // that went idle past the TTL while it was down included.
  std::unique_ptr<SessionExpiry> expiry;
  const absl::Duration idle_ttl = limits.idle_session_ttl;
  if (idle_ttl > absl::ZeroDuration()) {
    expiry = std::make_unique<SessionExpiry>(&sessions, idle_ttl);
  }
  // Before the engine: running jobs hold claims on it until they end.
  TenantUsage tenant_usage(&sessions, &quotas);
  EngineOptions engine_options;
  engine_options.threads = absl::GetFlag(FLAGS_threads);
  engine_options.max_batch_tokens = absl::GetFlag(FLAGS_max_batch_tokens);
  engine_options.matmul = config->matmul;
  engine_options.max_queued_jobs = absl::GetFlag(FLAGS_max_queued_jobs);
  std::unique_ptr<ServerMetrics> server_metrics;
  if (metrics_http) {
    server_metrics = std::make_unique<ServerMetrics>(&registry, engine_options.max_batch_tokens,
                                                     engine_options.max_queued_jobs);
    engine_options.step_observer = server_metrics->StepObserver();
  }
  Engine engine(**model, &sessions, &completions, engine_options);
  if (server_metrics) server_metrics->Attach(&sessions, &engine);
  // Scrapes read the engine and sessions: stop serving them before those go.
  absl::Cleanup stop_metrics = [&metrics_http] {
    if (metrics_http) metrics_http->Stop();
  };

  ServerFacts facts{.version = kVersion,
                    .model_path = config->model_path,
                    .kernels = absl::StrCat(ActiveKernelsName(), AmxAttentionInUse() ? ", attention amx" : ""),
                    .max_batch_tokens = engine_options.max_batch_tokens,
                    .chat_template = absl::GetFlag(FLAGS_chat_template),
                    .replica = ReplicaName()};
  if (!ValidReplicaName(facts.replica)) {
    return Fail("--replica-name must be 1 to 253 printable ASCII characters without spaces");
  }
  // Per-tenant series only with --auth-keys: the keys file bounds the labels.
  if (metrics_http && authenticator) RegisterTenantMetrics(&registry, &tenant_usage);
  KvSessionService service(**model, &sessions, &engine, &io, facts);
  service.SetTenantUsage(&tenant_usage);
  service.SetMaxUnsentBytes(int64_t{absl::GetFlag(FLAGS_max_unsent_mb)} << 20);
  service.SetMaxUnsentStreamBytes(int64_t{absl::GetFlag(FLAGS_max_unsent_stream_kb)} << 10);
  service.SetMigrationMemory(int64_t{std::max(1, absl::GetFlag(FLAGS_max_migration_mb))} << 20);
  if (metrics_http) {
    registry.AddCollector([&service](metrics::Exposition& out) {
      out.Gauge("kvsession_generate_unsent_bytes",
                "Bytes of Generate messages their clients have not read yet, all streams (--max-unsent-mb).",
                {}, service.unsent_bytes().total());
      out.Gauge("kvsession_migration_memory_bytes",
                "RAM migration streams in flight hold (--max-migration-mb).", {},
                service.migration_memory().held());
    });
    registry.AddCollector([expiry = expiry.get()](metrics::Exposition& out) {
      out.Counter("kvsession_sessions_expired_total",
                  "Sessions deleted for being unused for --delete-idle-sessions-after.", {},
                  expiry != nullptr ? static_cast<double>(expiry->expired_count()) : 0.0);
    });
  }
  // This collector reads the service: stop serving scrapes before it goes,
  // on every way out.
  absl::Cleanup stop_metrics_before_service = [&metrics_http] {
    if (metrics_http) metrics_http->Stop();
  };
  service.SetAuthenticator(authenticator.get());
  SessionOwnership ownership(&sessions);
  service.SetAccessPolicy(&ownership);
  int port = 0;
  std::unique_ptr<grpc::Server> server =
      StartServer(config->listen, config->transport, *credentials, &service, limits, rpc_metrics.get(), audit.get(),
                  facts.replica, &port);
  if (!server || port == 0) return Fail(absl::StrCat("cannot listen on ", config->listen));
  // grpc.health.v1 answers for the server ("") and for the service by name.
  server->GetHealthCheckService()->SetServingStatus(kvsession::v1::KvSession::service_full_name(), true);

  std::cerr << "kvsessiond: " << sessions.session_count() << " sessions in " << config->data_dir
            << "; KV cache " << max_pages << " pages x " << geometry.page_tokens << " tokens ("
            << (max_pages * geometry.page_bytes() >> 20) << " MiB, " << KvDtypeName(geometry.dtype)
            << "), " << warm_pages * geometry.page_tokens << " tokens kept warm; " << engine.threads()
            << " threads, kernels " << facts.kernels << ", matmul " << MatmulPathName(config->matmul) << "\n";
  std::cerr << "kvsessiond: transport: "
            << (absl::GetFlag(FLAGS_tls_cert).empty()
                    ? "plaintext (no --tls-cert)"
                    : (absl::GetFlag(FLAGS_tls_client_ca).empty() ? "TLS"
                                                                  : "mutual TLS (client certificates required)"))
            << "; authentication: ";
  if (authenticator) {
    std::cerr << key_summary;
    if (absl::GetFlag(FLAGS_shared_prefix_cache)) std::cerr << "; prefix cache SHARED across tenants";
  } else {
    std::cerr << "OFF (no --auth-keys): every caller is tenant \"" << kDefaultTenant << "\""
              << (IsLoopbackListen(config->listen) ? "; loopback only"
                                                   : "; --insecure-no-auth: ANYONE WHO CAN REACH THE PORT");
  }
  std::cerr << "\n";
  std::cerr << "kvsessiond: listening on " << config->listen.substr(0, config->listen.rfind(':') + 1)
            << port << std::endl;
  if (expiry) {
    expiry->Start();
    std::cerr << "kvsessiond: sessions unused for " << absl::FormatDuration(idle_ttl)
              << " are deleted (checked every " << absl::FormatDuration(SessionExpiry::SweepInterval(idle_ttl))
              << "; checkpoints stay)" << std::endl;
  }
  if (metrics_http) metrics_http->SetReady(true);
  WritePortFile(absl::GetFlag(FLAGS_port_file), port);

  const int sig = WaitForShutdownSignal(signals, authenticator.get(), &quotas);
  std::cerr << "kvsessiond: " << (sig == SIGTERM ? "SIGTERM" : "SIGINT")
            << ": cancelling generations, persisting sessions, shutting down" << std::endl;
  if (expiry) expiry->Stop();  // no session expires while the server drains
  Drain(server.get(), &engine, metrics_http.get());
  std::cerr << "kvsessiond: stopped" << std::endl;
  return 0;
}

}  // namespace
}  // namespace kvs

int main(int argc, char** argv) {
  // A restore reads pages of ~2 MB through RocksDB's buffers. glibc would
  // map each such buffer fresh and unmap it on free (or trim it from a
  // thread's arena), so every page read paid ~500 page faults and the
  // kernel's zeroing; these keep freed buffers of up to 32 MB in the heap,
  // and up to 64 MB free at a heap's top, for the next read.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
  // glibc gives threads up to 8 arenas per core, and each keeps what its
  // threads freed (up to the trim threshold above at its top). gRPC's
  // threads spread over new arenas as the load goes on, so the RSS crept
  // for minutes: a 10-minute TLS load on 2 cores rose 98 -> 178 MiB with a
  // flat live heap (heaptrack); with one arena per core it ended at 165 MiB
  // and served as many calls (docs/operations.md, "Resident memory under a long load").
  // MALLOC_ARENA_MAX in the environment still decides when it is set.
  if (std::getenv("MALLOC_ARENA_MAX") == nullptr) {
    mallopt(M_ARENA_MAX, static_cast<int>(std::max(2u, std::thread::hardware_concurrency())));
  }
  absl::SetProgramUsageMessage(
      "kvsessiond --model M.gguf --listen 127.0.0.1:50051 --data-dir DIR [flags]");
  // Flags are spelled with dashes on the command line (--data-dir); Abseil
  // names them with underscores.
  std::vector<std::string> args(argv, argv + argc);
  std::vector<char*> fixed;
  for (std::string& a : args) {
    if (a.rfind("--", 0) == 0) {
      const size_t end = std::min(a.find('='), a.size());
      std::replace(a.begin() + 2, a.begin() + end, '-', '_');
    }
    fixed.push_back(a.data());
  }
  absl::ParseCommandLine(static_cast<int>(fixed.size()), fixed.data());
  return kvs::Serve();
}
