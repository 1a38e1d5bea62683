// Test helper: N real kvsessiond replicas behind a real nginx, all on
// loopback, started from deploy/nginx/kvsession-fleet.conf (the deployed
// file itself: only its upstream `server` lines and its `listen` line are
// replaced with the test's addresses). Each replica is named "rI"
// (--replica-name) and can be killed (-9) and restarted on the same data
// dir and port. nginx runs in the foreground as the test's child
// (`nginx -p DIR -c DIR/nginx.conf -e DIR/error.log -g 'daemon off; ...'`),
// with its pid file, logs and temp paths in the test's directory.
#ifndef KVSESSION_TESTS_NGINX_FLEET_H_
#define KVSESSION_TESTS_NGINX_FLEET_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/server_process.h"
#include "tests/subprocess.h"

namespace kvs {

class NginxFleet {
 public:
  // The nginx binary, or "" when nginx is not installed (tools/setup
  // installs Debian's).
  static std::string NginxBinary() {
    for (const char* p : {"/usr/sbin/nginx", "/usr/bin/nginx", "/usr/local/sbin/nginx"}) {
      if (::access(p, X_OK) == 0) return p;
    }
    return "";
  }

  NginxFleet(std::filesystem::path dir, std::string model) : dir_(std::move(dir)), model_(std::move(model)) {}
  ~NginxFleet() {
    StopNginx();
    for (auto& r : replicas_) {
      if (r && r->Running()) r->Stop();
    }
  }

  // Starts `n` replicas, then nginx in front of them. False with `error`
  // set when something does not start.
  bool Start(int n, std::string* error) {
    for (int i = 0; i < n; ++i) {
      replicas_.push_back(std::make_unique<ServerProcess>());
      ports_.push_back("");
      if (!StartReplica(i, "0")) {
        *error = "replica " + Name(i) + " did not start: " + replicas_[i]->log();
        return false;
      }
      ports_[i] = replica_address(i).substr(replica_address(i).rfind(':') + 1);
    }
    return StartNginx(error);
  }

  std::string proxy_address() const { return "127.0.0.1:" + std::to_string(proxy_port_); }
  int size() const { return static_cast<int>(replicas_.size()); }
  static std::string Name(int i) { return "r" + std::to_string(i); }
  std::string replica_address(int i) const { return replicas_[i]->address(); }
  ServerProcess& replica(int i) { return *replicas_[i]; }
  std::string nginx_log() const { return ReadFile((dir_ / "nginx" / "error.log").string()); }

  // kill -9.
  void KillReplica(int i) { replicas_[i]->Kill(); }
  // The same name, data dir and port as before.
  bool RestartReplica(int i) { return StartReplica(i, ports_[i]); }

 private:
  bool StartReplica(int i, const std::string& port) {
    // --listen again: the last one wins over ServerProcess's port 0.
    return replicas_[i]->Start(model_, (dir_ / Name(i)).string(),
                               {"--replica-name", Name(i), "--kv-cache-mb", "64", "--listen",
                                "127.0.0.1:" + port});
  }

  static int FreeLoopbackPort() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    int port = 0;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      port = ntohs(addr.sin_port);
    }
    ::close(fd);
    return port;
  }

  static bool Accepts(int port) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    ::close(fd);
    return ok;
  }

  // The deployed snippet with this fleet's addresses. False (with `error`)
  // when the file no longer has the lines this replaces.
  bool FleetConf(std::string* conf, std::string* error) const {
    const std::string deployed = ReadFile(std::string(KVS_SOURCE_DIR) + "/deploy/nginx/kvsession-fleet.conf");
    const std::regex server_line(R"(\n[ \t]*server[ \t]+\S+[ \t]+max_fails=0;[^\n]*)");
    const std::regex listen_line(R"(\n[ \t]*listen[ \t]+\S+[ \t]+http2;[^\n]*)");
    const auto count = [&](const std::regex& re) {
      return std::distance(std::sregex_iterator(deployed.begin(), deployed.end(), re), std::sregex_iterator());
    };
    if (count(server_line) < 1 || count(listen_line) != 1) {
      *error = "deploy/nginx/kvsession-fleet.conf: expected upstream lines `server ADDR max_fails=0;` and one "
               "`listen PORT http2;`";
      return false;
    }
    std::string servers;
    for (int i = 0; i < size(); ++i) servers += "\n    server " + replica_address(i) + " max_fails=0;";
    // The first server line becomes this fleet's list, the others go.
    std::smatch first;
    std::regex_search(deployed, first, server_line);
    std::string out = first.prefix().str() + "\n@SERVERS@" + first.suffix().str();
    out = std::regex_replace(out, server_line, "");
    out.replace(out.find("\n@SERVERS@"), 10, servers);
    *conf = std::regex_replace(out, listen_line, "\n    listen 127.0.0.1:" + std::to_string(proxy_port_) + " http2;");
    return true;
  }

  bool StartNginx(std::string* error) {
    const std::filesystem::path d = dir_ / "nginx";
    std::filesystem::create_directories(d / "tmp");
    for (int attempt = 0; attempt < 3; ++attempt) {
      proxy_port_ = FreeLoopbackPort();
      std::string fleet;
      if (!FleetConf(&fleet, error)) return false;
      std::ofstream(d / "kvsession-fleet.conf") << fleet;
      std::ofstream(d / "nginx.conf")
          << "worker_processes 1;\n"
          << "events { worker_connections 512; }\n"
          << "http {\n"
          << "  access_log " << (d / "access.log").string() << ";\n"
          << "  client_body_temp_path " << (d / "tmp" / "body").string() << ";\n"
          << "  proxy_temp_path " << (d / "tmp" / "proxy").string() << ";\n"
          << "  fastcgi_temp_path " << (d / "tmp" / "fastcgi").string() << ";\n"
          << "  uwsgi_temp_path " << (d / "tmp" / "uwsgi").string() << ";\n"
          << "  scgi_temp_path " << (d / "tmp" / "scgi").string() << ";\n"
          << "  include " << (d / "kvsession-fleet.conf").string() << ";\n"
          << "}\n";
      nginx_ = std::make_unique<ChildProcess>();
      const std::string pid = "daemon off; pid " + (d / "nginx.pid").string() + ";";
      if (!nginx_->Start({NginxBinary(), "-p", d.string() + "/", "-c", (d / "nginx.conf").string(), "-e",
                          (d / "error.log").string(), "-g", pid},
                         (d / "nginx.out").string(), (d / "nginx.err").string())) {
        *error = "cannot fork nginx";
        return false;
      }
      // nginx writes its pid file once its sockets are bound: a connection
      // before that may reach another process that took the port meanwhile.
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (std::chrono::steady_clock::now() < until && nginx_->Running()) {
        if (std::filesystem::exists(d / "nginx.pid") && Accepts(proxy_port_) && nginx_->Running()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      StopNginx();  // e.g. the port was taken meanwhile: another one
    }
    *error = "nginx did not start: " + ReadFile((d / "nginx.err").string()) + nginx_log();
    return false;
  }

  void StopNginx() {
    if (!nginx_) return;
    // TERM: the master stops its workers and exits (a SIGKILL would orphan them).
    nginx_->Signal(SIGTERM);
    nginx_->Wait();
    nginx_.reset();
  }

  const std::filesystem::path dir_;
  const std::string model_;
  std::vector<std::unique_ptr<ServerProcess>> replicas_;
  std::vector<std::string> ports_;
  std::unique_ptr<ChildProcess> nginx_;
  int proxy_port_ = 0;
};

}  // namespace kvs

#endif  // KVSESSION_TESTS_NGINX_FLEET_H_
