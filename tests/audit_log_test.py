#!/usr/bin/env python3
"""kvsessiond --audit-log and kvsession_tenant_requests_total against the
real server (issue 10): every line parsed with Python's json, one line per
mutating call with its tenant, method, ids, status code, tokens and
latency, and never a request's text or an API key. Also the Python client's
`as_tenant` (an admin key acting for a tenant).

Run by ctest with KVS_BINARY_DIR, KVS_SOURCE_DIR and KVS_SHARED_DIR set.
"""

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

SOURCE = os.environ["KVS_SOURCE_DIR"]
BINARY = os.environ["KVS_BINARY_DIR"]
SHARED = os.environ["KVS_SHARED_DIR"]
sys.path.insert(0, os.path.join(SOURCE, "client", "python"))

import grpc  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402
from kvsession_client import Client, pb  # noqa: E402

MODEL = os.path.join(SHARED, "models", "aidreams260K.gguf")
KEYS = {"acme": ("user", "acme-secret-key"), "beta": ("user", "beta-secret-key"),
        "root": ("admin", "root-secret-key")}
SECRET_TEXT = "Zebra violet whispers"
SECRET_APPEND = "quartz lantern melody"
SECRET_PROMPT = "copper river dawn"


def wait_for_file(path, server):
    deadline = time.time() + 60
    def read():
        if not os.path.exists(path):
            return ""
        with open(path) as f:
            return f.read().strip()
    while not read():
        if time.time() > deadline or server.poll() is not None:
            raise RuntimeError("kvsessiond did not start")
        time.sleep(0.02)
    return int(read())


@unittest.skipUnless(os.path.exists(MODEL), "../shared not present")
class AuditLogTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="kvs_audit_")
        keys = os.path.join(self.tmp, "keys.txt")
        with open(keys, "w") as f:
            for tenant, (role, key) in KEYS.items():
                f.write("%s %s %s\n" % (tenant, role, hashlib.sha256(key.encode()).hexdigest()))
        self.audit = os.path.join(self.tmp, "audit.jsonl")
        port_file = os.path.join(self.tmp, "port")
        metrics_port_file = os.path.join(self.tmp, "metrics_port")
        self.server = subprocess.Popen(
            [os.path.join(BINARY, "bin", "kvsessiond"), "--model", MODEL, "--listen", "127.0.0.1:0",
             "--data-dir", os.path.join(self.tmp, "data"), "--port-file", port_file,
             "--auth-keys", keys, "--audit-log", self.audit,
             "--metrics-listen", "127.0.0.1:0", "--metrics-port-file", metrics_port_file],
            stderr=subprocess.DEVNULL)
        self.address = "127.0.0.1:%d" % wait_for_file(port_file, self.server)
        self.metrics_port = wait_for_file(metrics_port_file, self.server)
        self.acme = Client(self.address, api_key=KEYS["acme"][1])
        self.acme.wait_ready()

    def tearDown(self):
        self.server.send_signal(signal.SIGTERM)
        self.server.wait(timeout=30)
        if os.environ.get("KVS_AUDIT_SAMPLE"):  # print the log (for docs)
            with open(self.audit) as f:
                sys.stdout.write(f.read())
        shutil.rmtree(self.tmp, ignore_errors=True)

    def lines(self):
        """Every line of the audit log, each parsed as JSON."""
        with open(self.audit) as f:
            text = f.read()
        self.assertTrue(text.endswith("\n"))
        return [json.loads(line) for line in text.splitlines()]

    def test_every_mutating_call_writes_one_json_line_without_content_or_keys(self):
        sid = self.acme.create(SECRET_TEXT)
        created_length = self.acme.get(sid).length
        appended = self.acme.append(sid, SECRET_APPEND)
        _, _, last = self.acme.generate_all(sid, 3, prompt=SECRET_PROMPT, temperature=0)
        branches = self.acme.fork(sid, 2)
        checkpoint = self.acme.snapshot(sid, "name-is-not-logged").id
        restored = self.acme.restore_checkpoint(checkpoint)
        self.acme.restore_session(sid)  # loads, creates nothing
        self.acme.truncate(sid, 2)
        self.acme.get(sid, include_text=True)  # reads are not audited
        self.acme.info()
        self.acme.delete(branches[0])
        self.acme.stub.DeleteCheckpoint(pb.DeleteCheckpointRequest(checkpoint_id=checkpoint))
        missing = "ses_" + "0" * 32
        with self.assertRaises(grpc.RpcError) as e:
            self.acme.append(missing, SECRET_APPEND)
        self.assertEqual(e.exception.code(), grpc.StatusCode.NOT_FOUND)
        with self.assertRaises(grpc.RpcError) as e:
            Client(self.address, api_key="wrong-key").create(SECRET_TEXT)
        self.assertEqual(e.exception.code(), grpc.StatusCode.UNAUTHENTICATED)

        lines = self.lines()
        self.assertEqual([l["method"] for l in lines],
                         ["CreateSession", "Append", "Generate", "Fork", "Snapshot", "Restore", "Restore", "Truncate",
                          "DeleteSession", "DeleteCheckpoint", "Append", "CreateSession"])
        for l in lines[:-1]:
            self.assertEqual(l["tenant"], "acme")
            self.assertNotIn("acting_admin", l)
            self.assertRegex(l["time"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
            self.assertGreaterEqual(l["latency_ms"], 0)
        self.assertIsNone(lines[-1]["tenant"])
        self.assertEqual(lines[-1]["code"], "UNAUTHENTICATED")
        (create, append, generate, fork, snapshot, restore, reload, truncate,
         delete, delete_checkpoint, failed, _) = lines
        self.assertEqual(create["created"], [sid])
        self.assertEqual(create["code"], "OK")
        self.assertEqual(create["session_tokens"], created_length)
        self.assertEqual(append["session_tokens"], appended.session.length)
        self.assertEqual((append["session_id"], append["prompt_tokens"], append["cached_tokens"]),
                         (sid, appended.usage.prompt_tokens, appended.usage.cached_tokens))
        self.assertEqual(generate["generated_tokens"], last.usage.generated_tokens)
        self.assertEqual(generate["prompt_tokens"], last.usage.prompt_tokens)
        self.assertEqual((fork["session_id"], fork["created"]), (sid, branches))
        self.assertEqual((snapshot["session_id"], snapshot["created"]), (sid, [checkpoint]))
        self.assertEqual((restore["checkpoint_id"], restore["created"]), (checkpoint, [restored]))
        self.assertEqual(reload["session_id"], sid)
        self.assertNotIn("created", reload)
        self.assertEqual((truncate["session_id"], truncate["code"]), (sid, "OK"))
        self.assertEqual(delete["session_id"], branches[0])
        self.assertEqual(delete_checkpoint["checkpoint_id"], checkpoint)
        self.assertEqual((failed["session_id"], failed["code"]), (missing, "NOT_FOUND"))
        self.assertNotIn("created", failed)

        with open(self.audit) as f:
            text = f.read()
        for secret in [SECRET_TEXT, SECRET_APPEND, SECRET_PROMPT, "name-is-not-logged", "wrong-key"] + \
                [k for _, k in KEYS.values()] + [hashlib.sha256(k.encode()).hexdigest() for _, k in KEYS.values()]:
            self.assertNotIn(secret, text)

    def test_an_admin_acting_for_a_tenant_is_logged_as_that_tenant_and_counted_per_tenant(self):
        as_acme = Client(self.address, api_key=KEYS["root"][1], as_tenant="acme")
        sid = as_acme.create("hello")
        self.assertEqual([s.id for s in self.acme.stub.ListSessions(pb.ListSessionsRequest()).sessions], [sid])
        with self.assertRaises(grpc.RpcError) as e:
            Client(self.address, api_key=KEYS["beta"][1], as_tenant="acme").create("hello")
        self.assertEqual(e.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
        self.acme.append(sid, " world")
        beta = Client(self.address, api_key=KEYS["beta"][1])
        with self.assertRaises(grpc.RpcError):
            beta.append(sid, " again")  # not beta's: NOT_FOUND

        lines = self.lines()
        self.assertEqual(lines[0]["method"], "CreateSession")
        self.assertEqual((lines[0]["tenant"], lines[0]["acting_admin"]), ("acme", "root"))
        # beta's refused header: logged under beta, the header's value not at all.
        self.assertEqual((lines[1]["tenant"], lines[1]["code"]), ("beta", "PERMISSION_DENIED"))
        self.assertNotIn("acting_admin", lines[1])

        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.metrics_port, timeout=10) as r:
            scrape = r.read().decode("utf-8")
        samples = {}
        for family in text_string_to_metric_families(scrape):
            for s in family.samples:
                if s.name == "kvsession_tenant_requests_total":
                    samples[(s.labels["tenant"], s.labels["method"], s.labels["code"])] = s.value
        self.assertEqual(samples[("acme", "CreateSession", "OK")], 1)
        self.assertEqual(samples[("acme", "Append", "OK")], 1)
        self.assertEqual(samples[("acme", "ListSessions", "OK")], 1)
        self.assertEqual(samples[("beta", "Append", "NOT_FOUND")], 1)
        self.assertEqual(samples[("beta", "CreateSession", "PERMISSION_DENIED")], 1)
        self.assertNotIn(("root", "CreateSession", "OK"), samples)

    def test_calls_to_made_up_method_paths_share_one_unknown_series_and_log_line_name(self):
        # gRPC answers UNIMPLEMENTED after the interceptors ran: without a
        # key too. Each made-up path must not become a series of its own.
        channel = grpc.insecure_channel(self.address)
        for name in ("X" * 4000, "Y" * 4000, "Bogus"):
            call = channel.unary_unary("/kvsession.v1.KvSession/" + name)
            with self.assertRaises(grpc.RpcError) as e:
                call(b"", timeout=10)
            self.assertEqual(e.exception.code(), grpc.StatusCode.UNIMPLEMENTED)
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.metrics_port, timeout=10) as r:
            scrape = r.read().decode("utf-8")
        self.assertNotIn("XXXX", scrape)
        methods = {}
        for family in text_string_to_metric_families(scrape):
            for s in family.samples:
                if s.name == "kvsession_tenant_requests_total":
                    methods[s.labels["method"]] = methods.get(s.labels["method"], 0) + s.value
        self.assertEqual(methods.get("(unknown)"), 3)
        logged = [line["method"] for line in self.lines()]
        self.assertEqual(logged.count("(unknown)"), 3)
        self.assertFalse([m for m in logged if len(m) > 64])


if __name__ == "__main__":
    unittest.main(verbosity=2)
