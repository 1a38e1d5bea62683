#!/usr/bin/env python3
"""The Python client (client/python) against the real kvsessiond binary.

Uses only Debian's python3-grpcio (and the protoc it needs to generate stubs
from the .proto). Run by ctest with KVS_BINARY_DIR, KVS_SOURCE_DIR and
KVS_SHARED_DIR in the environment. The stub-cache and argument tests need
no server (nor ../shared).
"""

import hashlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import unittest

SOURCE = os.environ["KVS_SOURCE_DIR"]
BINARY = os.environ["KVS_BINARY_DIR"]
SHARED = os.environ["KVS_SHARED_DIR"]
CLIENT_DIR = os.path.join(SOURCE, "client", "python")
sys.path.insert(0, CLIENT_DIR)

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

    def test_streams_have_no_deadline_by_default_and_unary_calls_keep_theirs(self):
        sid = self.client.create("Once")
        call = self.client.generate(sid, max_tokens=4, temperature=0)
        self.assertIsNone(call.time_remaining(), "a stream has no deadline by default")
        self.assertEqual(len([t for m in call for t in m.token_ids]), 4)
        call = self.client.generate(sid, max_tokens=4, temperature=0, timeout=30)
        self.assertTrue(0 < call.time_remaining() <= 30, call.time_remaining())
        list(call)
        # A client whose unary deadline has always passed (a negative timeout:
        # 1e-6 s can outlast a local call): its unary calls fail, its streams do not.
        hurried = Client(self.address, timeout=-1)
        with self.assertRaises(grpc.RpcError) as e:
            hurried.info()
        self.assertEqual(e.exception.code(), grpc.StatusCode.DEADLINE_EXCEEDED)
        ids, _, last = hurried.generate_all(sid, 4, temperature=0)
        self.assertEqual((len(ids), last.finish_reason), (4, pb.FINISH_REASON_LENGTH))
        # An explicit stream deadline, per call or per client, still applies.
        for client, kwargs in ((hurried, {"timeout": -1}), (Client(self.address, stream_timeout=-1), {})):
            with self.assertRaises(grpc.RpcError) as e:
                client.generate_all(sid, 4, temperature=0, **kwargs)
            self.assertEqual(e.exception.code(), grpc.StatusCode.DEADLINE_EXCEEDED)
        # Without a deadline the caller ends a stream with cancel() (the
        # server may already have sent all of this short one: then it just ends).
        call = self.client.generate(sid, max_tokens=64, temperature=0)
        self.assertIsInstance(call, grpc.Call)
        next(call)
        call.cancel()
        try:
            list(call)
        except grpc.RpcError as e:
            self.assertEqual(e.code(), grpc.StatusCode.CANCELLED)

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
        _openssl("req", "-new", *ec, "-keyout", "client.key", "-out", "client.csr",
                 "-subj", "/CN=kvs-py-client", cwd=d)
        _openssl("x509", "-req", "-in", "client.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                 "-CAcreateserial", "-out", "client.pem", "-days", "2", cwd=d)
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

    def test_a_client_certificate_with_its_key_connects(self):
        d = self.tmp
        client = Client(self.address, tls_ca=self.ca, tls_cert=os.path.join(d, "client.pem"),
                        tls_key=os.path.join(d, "client.key"), api_key="py-secret")
        self.assertTrue(client.create("Once upon a time").startswith("ses_"))


class PythonClientSettingsTest(unittest.TestCase):
    """Client settings that would connect with less security than asked for
    are errors before anything is read or sent (no server needed)."""

    def test_incomplete_or_empty_tls_settings_are_value_errors(self):
        # The paths do not exist: a setting that were read first would fail otherwise.
        ca, cert, key = "/nonexistent/ca.pem", "/nonexistent/client.pem", "/nonexistent/client.key"
        for kwargs, words in (({"tls_key": key}, "tls_key"),
                              ({"tls_cert": cert}, "tls_cert"),
                              ({"tls_ca": ca, "tls_key": key}, "tls_key"),
                              ({"tls_ca": ""}, "tls_ca"),
                              ({"tls_ca": "", "tls": True}, "tls_ca"),
                              ({"tls_cert": "", "tls_key": key}, "tls_cert"),
                              ({"tls_cert": cert, "tls_key": ""}, "tls_key"),
                              ({"tls_ca": ca, "tls_cert": "", "tls_key": ""}, "tls_cert")):
            with self.subTest(**kwargs):
                with self.assertRaises(ValueError) as e:
                    Client("127.0.0.1:1", api_key="secret", **kwargs)
                self.assertIn(words, str(e.exception))
        # None is "not given": a plain channel, as before.
        Client("127.0.0.1:1", tls_ca=None, tls_cert=None, tls_key=None)

    def test_the_example_refuses_a_key_without_its_certificate(self):
        out = subprocess.run(
            [sys.executable, os.path.join(CLIENT_DIR, "example.py"), "--server", "127.0.0.1:1",
             "--tls-key", "/nonexistent/client.key"],
            capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 2, out.stderr)
        self.assertIn("tls_key", out.stderr)


# Imports the client in a fresh interpreter: prints the generated module's
# file, a field set through it, and whether any sys.path entry lies under argv[2].
_IMPORT_CLIENT = """
import sys
sys.path.insert(0, sys.argv[1])
import kvsession_client
print(kvsession_client.pb.__file__)
print(kvsession_client.pb.SamplingParams(top_k=7).top_k)
print(any(p.startswith(sys.argv[2]) for p in sys.path))
"""


class PythonStubCacheTest(unittest.TestCase):
    """Where the client generates its gRPC stubs: a directory only this user
    can change, never one another user could have prepared (no server
    needed). Each test runs the import in a fresh interpreter with its own
    XDG_CACHE_HOME, TMPDIR and HOME."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="kvs_pystubs_")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        with open(os.path.join(SOURCE, "proto", "kvsession", "v1", "kvsession.proto"), "rb") as f:
            self.digest = hashlib.sha256(f.read()).hexdigest()[:16]
        self.cache = os.path.join(self.tmp, "cache")
        self.base = os.path.join(self.cache, "kvsession-py")
        self.stubs = os.path.join(self.base, self.digest)
        self.tmpdir = os.path.join(self.tmp, "tmp")
        self.marker = os.path.join(self.tmp, "planted-imported")
        os.mkdir(self.tmpdir)
        os.mkdir(os.path.join(self.tmp, "home"))
        self.env = dict(os.environ, XDG_CACHE_HOME=self.cache, TMPDIR=self.tmpdir,
                        HOME=os.path.join(self.tmp, "home"))
        # Where the client once generated them, in world-writable /tmp: always planted.
        self.plant(os.path.join(self.tmpdir, "kvsession-py-" + self.digest), 0o777)

    def plant(self, directory, mode):
        """Stub modules under `directory` that record their import and fail;
        every directory and file made gets `mode` (files without x)."""
        v1 = os.path.join(directory, "kvsession", "v1")
        os.makedirs(v1, exist_ok=True)
        for name in ("kvsession_pb2.py", "kvsession_pb2_grpc.py"):
            with open(os.path.join(v1, name), "w") as f:
                f.write("open(%r, 'a').write(__name__ + '\\n')\n"
                        "raise ImportError('planted stub imported')\n" % self.marker)
        for root, dirs, files in os.walk(directory):
            os.chmod(root, mode)
            for name in files:
                os.chmod(os.path.join(root, name), mode & 0o666)

    def import_client(self):
        """(stub module file, stderr) of a fresh import; fails the test when
        the import fails, a planted module ran, or the stubs are on sys.path."""
        out = subprocess.run([sys.executable, "-c", _IMPORT_CLIENT, CLIENT_DIR, self.tmp],
                             env=self.env, cwd=self.tmp, capture_output=True, text=True, timeout=120)
        self.assertFalse(os.path.exists(self.marker), "a planted stub module was imported")
        self.assertEqual(out.returncode, 0, out.stderr)
        pb_file, top_k, on_path = out.stdout.split()
        self.assertEqual((top_k, on_path), ("7", "False"), "the stub directory is not on sys.path")
        return pb_file, out.stderr

    def assert_private_tree(self, path):
        for root, dirs, files in os.walk(path):
            for entry in [root] + [os.path.join(root, n) for n in files]:
                st = os.lstat(entry)
                self.assertEqual(st.st_uid, os.geteuid(), entry)
                self.assertEqual(stat.S_IMODE(st.st_mode) & 0o077, 0, entry)

    def test_stubs_are_generated_once_into_a_private_cache_even_by_racing_processes(self):
        procs = [subprocess.Popen([sys.executable, "-c", _IMPORT_CLIENT, CLIENT_DIR, self.tmp],
                                  env=self.env, cwd=self.tmp, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(6)]
        for proc in procs:
            stdout, stderr = proc.communicate(timeout=120)
            self.assertEqual(proc.returncode, 0, stderr)
            self.assertEqual(stdout.split(), [os.path.join(self.stubs, "kvsession", "v1", "kvsession_pb2.py"),
                                              "7", "False"])
        self.assertFalse(os.path.exists(self.marker), "a planted stub module was imported")
        self.assertEqual(os.listdir(self.base), [self.digest], "no half-made directories are left")
        self.assert_private_tree(self.base)
        self.assertFalse(any(n.endswith(".pyc") for _, _, files in os.walk(self.base) for n in files))
        inode = os.stat(self.stubs).st_ino
        pb_file, stderr = self.import_client()
        self.assertEqual(pb_file, os.path.join(self.stubs, "kvsession", "v1", "kvsession_pb2.py"))
        self.assertEqual(os.stat(self.stubs).st_ino, inode, "the cached stubs are reused")
        self.assertEqual(stderr, "")

    def test_a_stub_directory_others_can_write_is_not_used(self):
        os.makedirs(self.base, 0o700)
        self.plant(self.stubs, 0o777)
        pb_file, stderr = self.import_client()
        self.assertIn("RuntimeWarning", stderr)
        # Generated again in its place, this time private.
        self.assertEqual(pb_file, os.path.join(self.stubs, "kvsession", "v1", "kvsession_pb2.py"))
        with open(pb_file) as f:
            self.assertNotIn("planted", f.read())
        self.assertEqual(os.listdir(self.base), [self.digest])
        self.assert_private_tree(self.base)

    def test_a_cache_others_can_write_is_not_used(self):
        os.makedirs(self.base)
        os.chmod(self.base, 0o777)
        self.plant(self.stubs, 0o700)
        pb_file, stderr = self.import_client()
        self.assertIn("RuntimeWarning", stderr)
        # Generated into a private temporary directory instead, removed at exit.
        self.assertTrue(pb_file.startswith(self.tmpdir + os.sep), pb_file)
        self.assertFalse(os.path.exists(pb_file))
        self.assertEqual(os.listdir(self.tmpdir), ["kvsession-py-" + self.digest])

    @unittest.skipUnless(os.geteuid() == 0, "needs root to make a directory another user owns")
    def test_a_stub_directory_another_user_owns_is_not_used(self):
        os.makedirs(self.base, 0o700)
        self.plant(self.stubs, 0o755)
        for root, dirs, files in os.walk(self.stubs):
            for entry in [root] + [os.path.join(root, n) for n in files]:
                os.chown(entry, 65534, 65534)
        pb_file, stderr = self.import_client()
        self.assertIn("RuntimeWarning", stderr)
        self.assertEqual(os.stat(os.path.dirname(pb_file)).st_uid, os.geteuid())
        self.assert_private_tree(self.base)


if __name__ == "__main__":
    unittest.main()
