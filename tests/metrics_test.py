#!/usr/bin/env python3
"""kvsessiond --metrics-listen: the real server's /metrics scraped over HTTP
and parsed with Debian's python3-prometheus-client text parser; counters
move by exactly what a known workload did; /healthz and /readyz.

Run by ctest with KVS_BINARY_DIR, KVS_SOURCE_DIR and KVS_SHARED_DIR in the
environment (as tests/python_client_test.py).
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

SOURCE = os.environ["KVS_SOURCE_DIR"]
BINARY = os.environ["KVS_BINARY_DIR"]
SHARED = os.environ["KVS_SHARED_DIR"]
sys.path.insert(0, os.path.join(SOURCE, "client", "python"))

import grpc  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402
from kvsession_client import Client, pb, text_input  # noqa: E402

MODEL = os.path.join(SHARED, "models", "aidreams260K.gguf")
REFERENCE = os.path.join(SHARED, "reference", "aidreams260K.jsonl")


def wait_for_file(path, process, seconds=60):
    deadline = time.time() + seconds
    while not os.path.exists(path):
        if time.time() > deadline or process.poll() is not None:
            raise RuntimeError("kvsessiond did not start")
        time.sleep(0.02)
    with open(path) as f:
        return int(f.read().strip())


def http_get(port, path):
    """(status, body) of GET http://127.0.0.1:port/path."""
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=10) as r:
            return r.status, r.read().decode("utf-8")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8")


class Scrape:
    """One /metrics scrape, parsed: value(sample name, **labels)."""

    def __init__(self, text):
        self.samples = {}
        self.types = {}
        for family in text_string_to_metric_families(text):
            self.types[family.name] = family.type
            for s in family.samples:
                self.samples[(s.name, tuple(sorted(s.labels.items())))] = s.value

    def value(self, name, **labels):
        """The sample's value; 0 for a labelled series not yet present."""
        return self.samples.get((name, tuple(sorted(labels.items()))), 0.0)


@unittest.skipUnless(os.path.exists(MODEL), "../shared not present")
class MetricsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="kvs_metrics_")
        self.log = open(os.path.join(self.tmp, "log"), "w")
        self.start_server()
        with open(REFERENCE) as f:
            self.reference = [json.loads(line) for line in f if line.strip()]

    def start_server(self, *extra_args):
        """Starts kvsessiond on the test's data directory (again after a stop)."""
        port_file = os.path.join(self.tmp, "port")
        metrics_port_file = os.path.join(self.tmp, "metrics_port")
        for f in (port_file, metrics_port_file):
            if os.path.exists(f):
                os.remove(f)
        self.server = subprocess.Popen(
            [os.path.join(BINARY, "bin", "kvsessiond"), "--model", MODEL, "--listen", "127.0.0.1:0",
             "--data-dir", os.path.join(self.tmp, "data"), "--port-file", port_file,
             "--metrics-listen", "127.0.0.1:0", "--metrics-port-file", metrics_port_file,
             "--drain-delay-ms", "2000", *extra_args],
            stderr=self.log)
        self.metrics_port = wait_for_file(metrics_port_file, self.server)
        self.client = Client("127.0.0.1:%d" % wait_for_file(port_file, self.server))
        self.client.wait_ready()

    def stop_server(self):
        self.server.send_signal(signal.SIGTERM)
        self.assertEqual(self.server.wait(timeout=30), 0)
        self.client.channel.close()

    def tearDown(self):
        if self.server.poll() is None:
            self.server.send_signal(signal.SIGTERM)
            self.server.wait(timeout=30)
        self.client.channel.close()
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def scrape(self):
        status, body = http_get(self.metrics_port, "/metrics")
        self.assertEqual(status, 200)
        return Scrape(body)

    def test_counters_move_by_exactly_what_a_known_workload_did(self):
        before = self.scrape()
        self.assertEqual(before.types["kvsession_requests"], "counter")
        self.assertEqual(before.types["kvsession_request_duration_seconds"], "histogram")

        prompts = self.reference[:3]
        ids = [self.client.create(r["prompt"]) for r in prompts]
        for sid in ids[:2]:
            req = pb.GenerateRequest(session_id=sid, max_tokens=5, ignore_eos=True,
                                     sampling=pb.SamplingParams(temperature=0))
            generated = [t for m in self.client.stub.Generate(req, timeout=60) for t in m.token_ids]
            self.assertEqual(len(generated), 5)
        with self.assertRaises(grpc.RpcError) as bad:
            self.client.get("not an id!")  # a bad request
        self.assertEqual(bad.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)

        after = self.scrape()

        def delta(name, **labels):
            return after.value(name, **labels) - before.value(name, **labels)

        self.assertEqual(delta("kvsession_requests_total", method="CreateSession", code="OK"), 3)
        self.assertEqual(delta("kvsession_requests_total", method="Generate", code="OK"), 2)
        self.assertEqual(delta("kvsession_requests_total", method="GetSession", code="INVALID_ARGUMENT"), 1)
        self.assertEqual(delta("kvsession_requests_total", method="GetSession", code="OK"), 0)
        self.assertEqual(delta("kvsession_request_duration_seconds_count", method="CreateSession"), 3)
        self.assertEqual(delta("kvsession_request_duration_seconds_count", method="Generate"), 2)
        self.assertEqual(delta("kvsession_request_duration_seconds_bucket", method="Generate", le="+Inf"), 2)
        self.assertGreater(delta("kvsession_request_duration_seconds_sum", method="Generate"), 0)

        # Tokens: CreateSession prefills every prompt token but the last
        # (service/session.h: the next Generate's first step feeds it); each
        # Generate of 5 then runs 5 decode rows (that token and 4 sampled).
        prompt_tokens = sum(len(r["prompt_ids"]) - 1 for r in prompts)
        self.assertEqual(delta("kvsession_prefill_tokens_total"), prompt_tokens)
        self.assertEqual(delta("kvsession_decode_tokens_total"), 10)
        self.assertEqual(delta("kvsession_time_to_first_token_seconds_count"), 2)
        self.assertEqual(delta("kvsession_time_per_output_token_seconds_count"), 8)
        self.assertGreater(delta("kvsession_engine_steps_total"), 0)
        self.assertEqual(delta("kvsession_engine_step_batch_tokens_count"),
                         delta("kvsession_engine_steps_total"))
        self.assertEqual(delta("kvsession_engine_step_batch_tokens_sum"), prompt_tokens + 10)

        # State: three sessions held and stored; their KV in use.
        self.assertEqual(after.value("kvsession_sessions"), 3)
        self.assertEqual(after.value("kvsession_store_sessions"), 3)
        self.assertGreater(after.value("kvsession_kv_pages", state="in_use"), 0)
        self.assertEqual(after.value("kvsession_kv_in_use_bytes"),
                         after.value("kvsession_kv_pages", state="in_use") *
                         after.value("kvsession_kv_page_size_bytes"))
        self.assertGreater(after.value("kvsession_store_page_bytes"), 0)
        # Memory: at least the pages in use are mapped, and the default
        # --kv-warm-tokens 4096 keeps 256 pages of 16 tokens warm.
        self.assertGreaterEqual(after.value("kvsession_kv_pages", state="mapped"),
                                after.value("kvsession_kv_pages", state="in_use"))
        self.assertEqual(after.value("kvsession_kv_warm_target_pages"), 4096 // 16)
        # Every mutation persisted: 3 creates and 2 generates at least.
        self.assertGreaterEqual(delta("kvsession_persist_duration_seconds_count"), 5)
        # Every stream was read to its end; no migration is in flight. (A
        # stream's last bytes are given back when the server's side of the
        # call ends, which may be a moment after the client has its status.)
        self.assertEqual(after.types["kvsession_generate_unsent_bytes"], "gauge")
        self.assertEqual(after.value("kvsession_migration_memory_bytes"), 0)
        unsent = after.value("kvsession_generate_unsent_bytes")
        for _ in range(100):
            if unsent == 0:
                break
            time.sleep(0.05)
            unsent = self.scrape().value("kvsession_generate_unsent_bytes")
        self.assertEqual(unsent, 0)

    def test_a_request_that_does_not_parse_is_counted_as_invalid_argument(self):
        before = self.scrape()
        garbage = self.client.channel.unary_unary(
            "/kvsession.v1.KvSession/CreateSession",
            request_serializer=lambda b: b, response_deserializer=lambda b: b)
        with self.assertRaises(grpc.RpcError) as bad:
            garbage(b"\xff\xff\xff", timeout=30)
        self.assertEqual(bad.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        after = self.scrape()
        self.assertEqual(
            after.value("kvsession_requests_total", method="CreateSession", code="INVALID_ARGUMENT") -
            before.value("kvsession_requests_total", method="CreateSession", code="INVALID_ARGUMENT"), 1)
        self.assertEqual(after.value("kvsession_sessions"), 0, "nothing was created")

    def test_a_stored_session_used_after_a_restart_is_counted_as_one_restore(self):
        sid = self.client.create(self.reference[0]["prompt"])
        self.stop_server()
        self.start_server()
        before = self.scrape()
        self.assertEqual(before.value("kvsession_sessions"), 1)
        self.assertEqual(before.value("kvsession_sessions_resident"), 0, "KV loads on first use")
        self.assertEqual(before.value("kvsession_session_restores_total"), 0)
        ids, _, _ = self.client.generate_all(sid, 3, temperature=0)
        self.assertEqual(ids, self.reference[0]["greedy_ids"][:3])
        after = self.scrape()
        self.assertEqual(after.value("kvsession_session_restores_total"), 1)
        self.assertEqual(after.value("kvsession_session_restore_duration_seconds_count"), 1)
        # Its KV (all prompt tokens but the last) fits in one page, read from the store.
        self.assertEqual(after.value("kvsession_session_restored_bytes_total"),
                         after.value("kvsession_kv_page_size_bytes"))
        self.assertEqual(after.value("kvsession_sessions_resident"), 1)

    def test_evictions_count_exactly_the_sessions_that_left_memory_and_their_bytes(self):
        # 1 MiB of KV: a few dozen pages, so idle sessions must leave memory.
        self.stop_server()
        self.start_server("--kv-cache-mb", "1")
        first = self.scrape()
        page_bytes = first.value("kvsession_kv_page_size_bytes")
        max_pages = first.value("kvsession_kv_pages", state="max")
        self.assertGreater(page_bytes, 0)
        # Distinct texts from their first token: no page is shared, so each
        # session's pages are its own.
        story = self.reference[0]["prompt"]
        pages = {}
        for n in range(int(max_pages)):
            sid = self.client.create("%d %s" % (n, story))
            pages[sid] = self.client.get(sid).kv_pages
            self.assertGreater(pages[sid], 0)
            if sum(pages.values()) > 2 * max_pages:
                break
        after = self.scrape()
        described = {sid: self.client.get(sid) for sid in pages}
        evicted = [sid for sid, s in described.items() if not s.resident]
        self.assertGreater(len(evicted), 0, "the workload exceeds the KV budget")
        self.assertEqual(after.value("kvsession_session_evictions_total"), len(evicted))
        self.assertEqual(after.value("kvsession_session_evicted_bytes_total"),
                         sum(pages[sid] for sid in evicted) * page_bytes)
        self.assertEqual(after.value("kvsession_sessions_resident"), len(pages) - len(evicted))
        self.assertEqual(after.value("kvsession_sessions"), len(pages))
        self.assertEqual(after.value("kvsession_session_restores_total"), 0)
        # The oldest session left first, and using it brings it back: one restore.
        self.assertIn(next(iter(pages)), evicted)
        self.client.generate_all(next(iter(pages)), 1, temperature=0)
        self.assertEqual(self.scrape().value("kvsession_session_restores_total"), 1)

    def test_sessions_deleted_for_being_idle_are_counted_as_expired(self):
        off = self.scrape()
        self.assertIn(("kvsession_sessions_expired_total", ()), off.samples, "exported without the flag too")
        self.assertEqual(off.value("kvsession_sessions_expired_total"), 0)
        self.stop_server()
        self.start_server("--delete-idle-sessions-after", "1s")
        self.assertEqual(self.scrape().types["kvsession_sessions_expired"], "counter")
        for n in range(2):
            self.client.create("%d %s" % (n, self.reference[0]["prompt"]))
        deadline = time.time() + 20
        while self.scrape().value("kvsession_sessions") > 0 and time.time() < deadline:
            time.sleep(0.1)
        after = self.scrape()
        self.assertEqual(after.value("kvsession_sessions"), 0)
        self.assertEqual(after.value("kvsession_sessions_expired_total"), 2)
        self.assertEqual(after.value("kvsession_store_sessions"), 0)

    def test_health_and_readiness_follow_the_server_until_it_drains(self):
        self.assertEqual(http_get(self.metrics_port, "/healthz")[0], 200)
        self.assertEqual(http_get(self.metrics_port, "/readyz")[0], 200)
        self.assertEqual(http_get(self.metrics_port, "/nothing")[0], 404)
        self.server.send_signal(signal.SIGTERM)
        # --drain-delay-ms 2000: the process still answers, not ready.
        deadline = time.time() + 1.5
        status = 200
        while status == 200 and time.time() < deadline:
            status = http_get(self.metrics_port, "/readyz")[0]
            time.sleep(0.02)
        self.assertEqual(status, 503, "/readyz turns 503 while draining")
        self.assertEqual(http_get(self.metrics_port, "/healthz")[0], 200, "still alive while draining")
        self.assertEqual(self.server.wait(timeout=30), 0)


if __name__ == "__main__":
    unittest.main()
