// `kvsession migrate --session S --from A --to B [--with-checkpoints]
// [--keep-source] [--timeout-ms MS] [--json]` (client/migration.h): moves a
// session (and its checkpoints) from server A to server B and prints what
// moved. The connection flags (--tls-ca, --api-key, ...) apply to both
// servers. --timeout-ms is the deadline of each call of the move (export,
// FindMissingPages, import: MigrateOptions::timeout; GetSession,
// ListCheckpoints, the deletes: KvSessionClient::SetUnaryTimeout); without
// it each migration call gets 60 s plus 1 s per MiB it carries (an export:
// as for 1 GiB), and the others none.
// Exit codes: 0 ok, 1 a server answered an error, 2 usage.
#ifndef KVSESSION_CLIENT_MIGRATE_COMMAND_H_
#define KVSESSION_CLIENT_MIGRATE_COMMAND_H_

#include <string>
#include <vector>

namespace kvs {

int MigrateCommand(const std::vector<std::string>& args);

}  // namespace kvs

#endif  // KVSESSION_CLIENT_MIGRATE_COMMAND_H_
