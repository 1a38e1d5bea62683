#include "client/migrate_command.h"

#include <iostream>
#include <set>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cli_args.h"
#include "client/cli_connection.h"
#include "client/migration.h"

namespace kvs {

int MigrateCommand(const std::vector<std::string>& argv) {
  std::set<std::string> value_flags = {"session", "from", "to", "timeout-ms"};
  value_flags.insert(ConnectionValueFlags().begin(), ConnectionValueFlags().end());
  std::set<std::string> bool_flags = {"json", "with-checkpoints", "keep-source"};
  bool_flags.insert(ConnectionBoolFlags().begin(), ConnectionBoolFlags().end());
  absl::StatusOr<CliArgs> args = CliArgs::Parse(argv, value_flags, bool_flags);
  auto usage = [](const std::string& message) {
    std::cerr << "kvsession: " << message << "\n";
    return 2;
  };
  if (!args.ok()) return usage(std::string(args.status().message()));
  for (const char* flag : {"session", "from", "to"}) {
    if (args->GetOr(flag, "").empty()) return usage(absl::StrCat("migrate needs --", flag));
  }
  // One set of connection flags for both servers; --server is ignored.
  std::vector<std::string> from_argv = argv, to_argv = argv;
  from_argv.push_back("--server=" + *args->Get("from"));
  to_argv.push_back("--server=" + *args->Get("to"));
  absl::StatusOr<CliArgs> from_args = CliArgs::Parse(from_argv, value_flags, bool_flags);
  absl::StatusOr<CliArgs> to_args = CliArgs::Parse(to_argv, value_flags, bool_flags);
  if (!from_args.ok() || !to_args.ok()) return usage("bad flags");
  absl::StatusOr<std::unique_ptr<KvSessionClient>> from = ConnectFromFlags(*from_args);
  absl::StatusOr<std::unique_ptr<KvSessionClient>> to = ConnectFromFlags(*to_args);
  if (!from.ok()) return usage(std::string(from.status().message()));
  if (!to.ok()) return usage(std::string(to.status().message()));
  MigrateOptions options;
  options.with_checkpoints = args->Has("with-checkpoints");
  options.keep_source = args->Has("keep-source");
  if (args->Has("timeout-ms")) {
    absl::StatusOr<int64_t> ms = args->GetInt("timeout-ms", 0);
    if (!ms.ok()) return usage(std::string(ms.status().message()));
    if (*ms <= 0) return usage("--timeout-ms must be positive");
    options.timeout = std::chrono::milliseconds(*ms);
    // The other calls of the move (GetSession, ListCheckpoints, the deletes).
    (*from)->SetUnaryTimeout(options.timeout);
    (*to)->SetUnaryTimeout(options.timeout);
  }
  const std::string session = *args->Get("session");
  absl::StatusOr<MigrationReport> r = MigrateSession(**from, **to, session, options);
  if (!r.ok()) {
    std::cerr << "kvsession: " << absl::StatusCodeToString(r.status().code()) << ": "
              << r.status().message() << "\n";
    return 1;
  }
  if (args->Has("json")) {
    nlohmann::json j = {{"session", session},          {"sessions", r->sessions},
                        {"checkpoints", r->checkpoints}, {"pages_sent", r->pages_sent},
                        {"pages_skipped", r->pages_skipped}, {"bytes", r->bytes},
                        {"source_deleted", !options.keep_source}};
    std::cout << j.dump() << std::endl;
  } else {
    std::cout << "migrated " << session << " and " << r->checkpoints.size() << " checkpoint(s)"
              << (r->checkpoints.empty() ? "" : absl::StrCat(" (", absl::StrJoin(r->checkpoints, ", "), ")"))
              << ": " << r->pages_sent << " pages sent, " << r->pages_skipped
              << " skipped (already on the target), " << r->bytes << " bytes"
              << (options.keep_source ? "; source kept" : "; deleted from the source") << "\n";
  }
  return 0;
}

}  // namespace kvs
