#!/usr/bin/env python3
"""The Python client (client/python) against the real kvsessiond binary.

Uses only Debian's python3-grpcio (and the protoc it needs to generate stubs
from the .proto). Run by ctest with KVS_BINARY_DIR, KVS_SOURCE_DIR and
KVS_SHARED_DIR in the environment.
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

SOURCE = os.environ["KVS_SOURCE_DIR"]
BINARY = os.environ["KVS_BINARY_DIR"]
SHARED = os.environ["KVS_SHARED_DIR"]
sys.path.insert(0, os.path.join(SOURCE, "client", "python"))

import grpc  # noqa: E402
from kvsession_client import (REPLICA_HEADER, ROUTE_HEADER, Client, _CallDetails, _Route,  # noqa: E402
                              pb, route_key, text_input)

MODEL = os.path.join(SHARED, "models", "aidreams260K.gguf")
REFERENCE = os.path.join(SHARED, "reference", "aidreams260K.jsonl")


@unittest.skipUnless(os.path.exists(MODEL), "../shared not present")
class PythonClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="kvs_py_")
        port_file = os.path.join(cls.tmp, "port")
        cls.server = subprocess.Popen(
            [os.path.join(BINARY, "bin", "kvsessiond"), "--model", MODEL, "--listen", "127.0.0.1:0",
             "--data-dir", os.path.join(cls.tmp, "data"), "--port-file", port_file],
            stderr=open(os.path.join(cls.tmp, "log"), "w"))
        deadline = time.time() + 60
        while not os.path.exists(port_file):
            if time.time() > deadline or cls.server.poll() is not None:
                raise RuntimeError("kvsessiond did not start")
            time.sleep(0.02)
        cls.address = "127.0.0.1:" + open(port_file).read().strip()
        cls.client = Client(cls.address)
        cls.client.wait_ready()
        with open(REFERENCE) as f:
            cls.reference = [json.loads(line) for line in f if line.strip()]

    @classmethod
    def tearDownClass(cls):
        cls.server.send_signal(signal.SIGTERM)
        cls.server.wait(timeout=30)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_create_and_stream_greedy(self):
        ref = self.reference[0]
        sid = self.client.create(ref["prompt"])
        self.assertEqual(self.client.get(sid).length, len(ref["prompt_ids"]))
        messages = list(self.client.generate(sid, max_tokens=len(ref["greedy_ids"]), temperature=0))
        self.assertGreater(len(messages), 1, "the generation is streamed")
        ids = [t for m in messages for t in m.token_ids]
        self.assertEqual(ids, ref["greedy_ids"])
        self.assertEqual("".join(m.text for m in messages), ref["greedy_text"])
        self.assertEqual(messages[-1].finish_reason, pb.FINISH_REASON_LENGTH)
        self.assertEqual(messages[-1].usage.generated_tokens, len(ids))

    def test_fork_branches_differ_and_restore_continues(self):
        sid = self.client.create(self.reference[1]["prompt"])
        self.client.generate_all(sid, 8, temperature=0)
        branches = self.client.fork(sid, 4)
        self.assertEqual(len(set(branches)), 4)
        texts = {self.client.generate_all(b, 20, temperature=1.0)[1] for b in branches}
        self.assertGreater(len(texts), 1, "branches sample with different seeds")

        checkpoint = self.client.snapshot(sid, "py")
        expected, _, _ = self.client.generate_all(sid, 10, temperature=0)
        restored = self.client.restore_checkpoint(checkpoint.id)
        got, _, _ = self.client.generate_all(restored, 10, temperature=0)
        self.assertEqual(got, expected)

    def test_truncate_regenerates_and_fork_at_length_branches_earlier(self):
        sid = self.client.create(self.reference[1]["prompt"])
        length = self.client.get(sid).length
        answer, _, _ = self.client.generate_all(sid, 12, temperature=0)
        cut = self.client.truncate(sid, length)
        self.assertEqual((cut.session.length, cut.removed_tokens), (length, 12))
        again, _, _ = self.client.generate_all(sid, 12, temperature=0)
        self.assertEqual(again, answer)
        (branch,) = self.client.fork(sid, 1, at_length=length)
        self.assertEqual(self.client.get(branch).length, length)
        self.assertEqual(self.client.generate_all(branch, 12, temperature=0)[0], answer)
        with self.assertRaises(grpc.RpcError) as e:
            self.client.truncate(sid, length + 100)
        self.assertEqual(e.exception.code(), grpc.StatusCode.OUT_OF_RANGE)

    def test_errors_have_grpc_codes(self):
        with self.assertRaises(grpc.RpcError) as e:
            self.client.get("ses_" + "0" * 32)
        self.assertEqual(e.exception.code(), grpc.StatusCode.NOT_FOUND)
        with self.assertRaises(grpc.RpcError) as e:
            self.client.get("ses_unknown")
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        sid = self.client.create("I was flying")
        with self.assertRaises(grpc.RpcError) as e:
            self.client.stub.Append(pb.AppendRequest(session_id=sid, input=text_input(b"\xff\xfe")))
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        with self.assertRaises(grpc.RpcError) as e:
            self.client.generate_all(sid, 5, top_p=2.0)
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)

    def test_a_keyed_family_keeps_its_route_key_and_the_client_sends_it(self):
        # A proxy would set this header on CreateSession (docs/fleet.md).
        session, call = self.client.stub.CreateSession.with_call(
            pb.CreateSessionRequest(input=text_input("Once")), metadata=[(ROUTE_HEADER, "py-key_1")])
        self.assertTrue(session.id.startswith("ses_py-key_1."), session.id)
        self.assertIn(REPLICA_HEADER, dict(call.initial_metadata()))
        self.assertEqual(route_key(session.id), "py-key_1")
        branches = self.client.fork(session.id, 2)
        checkpoint = self.client.snapshot(branches[0])
        restored = self.client.restore_checkpoint(checkpoint.id)
        for id_ in branches + [checkpoint.id, restored]:
            self.assertEqual(route_key(id_), "py-key_1", id_)
        self.assertIsNone(route_key(self.client.create("plain")))
        # What the client's interceptor adds: the key of the id the request names.
        details = _CallDetails("/kvsession.v1.KvSession/Restore", None, None, None, None, None)
        routed = _Route._routed(details, pb.RestoreRequest(checkpoint_id=checkpoint.id))
        self.assertEqual(routed.metadata, [(ROUTE_HEADER, "py-key_1")])
        self.assertIs(_Route._routed(details, pb.CreateSessionRequest()), details)
        with self.assertRaises(grpc.RpcError) as e:
            self.client.stub.CreateSession(pb.CreateSessionRequest(), metadata=[(ROUTE_HEADER, "no spaces")])
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertNotIn("no spaces", e.exception.details())

    def test_example_script_runs(self):
        out = subprocess.run(
            [sys.executable, os.path.join(SOURCE, "client", "python", "example.py"),
             "--server", self.address, "--prompt", "I was flying", "-n", "12"],
            capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("greedy:", out.stdout)
        self.assertIn("restored", out.stdout)


def _openssl(*args, cwd):
    subprocess.run(["/usr/bin/openssl"] + list(args), cwd=cwd, check=True, capture_output=True)


@unittest.skipUnless(os.path.exists(MODEL), "../shared not present")
class PythonTlsClientTest(unittest.TestCase):
    """The example against a TLS server with API keys (certificates made by
    openssl at test time)."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="kvs_pytls_")
        d = cls.tmp
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        _openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
                 "-subj", "/CN=kvs-py-ca", cwd=d)
        with open(os.path.join(d, "server.ext"), "w") as f:
            f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
        _openssl("req", "-new", *ec, "-keyout", "server.key", "-out", "server.csr",
                 "-subj", "/CN=localhost", cwd=d)
        _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                 "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "server.ext", cwd=d)
        with open(os.path.join(d, "keys.txt"), "w") as f:
            f.write("acme user %s\n" % hashlib.sha256(b"py-secret").hexdigest())
        port_file = os.path.join(d, "port")
        cls.server = subprocess.Popen(
            [os.path.join(BINARY, "bin", "kvsessiond"), "--model", MODEL, "--listen", "127.0.0.1:0",
             "--data-dir", os.path.join(d, "data"), "--port-file", port_file,
             "--tls-cert", os.path.join(d, "server.pem"), "--tls-key", os.path.join(d, "server.key"),
             "--auth-keys", os.path.join(d, "keys.txt")],
            stderr=open(os.path.join(d, "log"), "w"))
        deadline = time.time() + 60
        while not os.path.exists(port_file):
            if time.time() > deadline or cls.server.poll() is not None:
                raise RuntimeError("kvsessiond did not start")
            time.sleep(0.02)
        cls.address = "127.0.0.1:" + open(port_file).read().strip()
        cls.ca = os.path.join(d, "ca.pem")

    @classmethod
    def tearDownClass(cls):
        cls.server.send_signal(signal.SIGTERM)
        cls.server.wait(timeout=30)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_example_runs_over_tls_with_a_key(self):
        out = subprocess.run(
            [sys.executable, os.path.join(SOURCE, "client", "python", "example.py"),
             "--server", self.address, "--prompt", "I was flying", "-n", "8",
             "--tls-ca", self.ca, "--api-key", "py-secret"],
            capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("restored", out.stdout)

    def test_the_key_comes_from_the_environment_and_a_wrong_one_is_unauthenticated(self):
        os.environ["KVSESSION_API_KEY"] = "py-secret"
        try:
            sid = Client(self.address, tls_ca=self.ca).create("Once upon a time")
            self.assertTrue(sid.startswith("ses_"))
        finally:
            del os.environ["KVSESSION_API_KEY"]
        with self.assertRaises(grpc.RpcError) as e:
            Client(self.address, tls_ca=self.ca, api_key="wrong").info()
        self.assertEqual(e.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
        with self.assertRaises(grpc.RpcError) as e:
            list(Client(self.address, tls_ca=self.ca).generate("ses_" + "0" * 32, 2))
        self.assertEqual(e.exception.code(), grpc.StatusCode.UNAUTHENTICATED)


if __name__ == "__main__":
    unittest.main()
