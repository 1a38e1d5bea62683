"""A small Python client for kvsession, built on Debian's python3-grpcio.

The gRPC stubs are generated from proto/kvsession/v1/kvsession.proto at
import time with Debian's protoc and grpc_python_plugin (packages
protobuf-compiler and protobuf-compiler-grpc) into a private cache
directory, so nothing generated is checked in.

    from kvsession_client import Client
    c = Client("127.0.0.1:50051")
    sid = c.create("Once upon a time")
    for chunk in c.generate(sid, max_tokens=32, temperature=0):
        print(chunk.text, end="", flush=True)
"""

import hashlib
import importlib
import os
import re
import subprocess
import sys
import tempfile

import grpc

_HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_ROOT = os.path.normpath(os.path.join(_HERE, "..", "..", "proto"))
PROTO_FILE = "kvsession/v1/kvsession.proto"


def _load_stubs():
    """Generates (once per proto version) and imports the Python stubs."""
    with open(os.path.join(PROTO_ROOT, PROTO_FILE), "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    out = os.path.join(tempfile.gettempdir(), "kvsession-py-" + digest)
    if not os.path.exists(os.path.join(out, "kvsession", "v1", "kvsession_pb2_grpc.py")):
        os.makedirs(out, exist_ok=True)
        subprocess.run(
            ["protoc", "-I", PROTO_ROOT, "--python_out=" + out, "--grpc_out=" + out,
             "--plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin", PROTO_FILE],
            check=True)
    if out not in sys.path:
        sys.path.insert(0, out)
    pb2 = importlib.import_module("kvsession.v1.kvsession_pb2")
    pb2_grpc = importlib.import_module("kvsession.v1.kvsession_pb2_grpc")
    return pb2, pb2_grpc


pb, pb_grpc = _load_stubs()

_SAMPLING_FIELDS = ("temperature", "top_k", "top_p", "min_p", "repetition_penalty",
                    "repetition_last_n", "seed")


def sampling(**kwargs):
    """SamplingParams with only the given fields set (others: session defaults)."""
    unknown = set(kwargs) - set(_SAMPLING_FIELDS)
    if unknown:
        raise TypeError("unknown sampling parameters: %s" % sorted(unknown))
    return pb.SamplingParams(**{k: v for k, v in kwargs.items() if v is not None})


def text_input(text):
    """An Input holding text (the API carries it as UTF-8 bytes)."""
    return pb.Input(text=text.encode("utf-8") if isinstance(text, str) else text)


class _ApiKey(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    """Adds `authorization: Bearer KEY` (when `key`) and
    `x-kvsession-tenant: T` (when `as_tenant`) to every call."""

    def __init__(self, key, as_tenant=None):
        self._metadata = []
        if key:
            self._metadata.append(("authorization", "Bearer " + key))
        if as_tenant:
            self._metadata.append(("x-kvsession-tenant", as_tenant))

    def _with_key(self, details):
        metadata = list(details.metadata or []) + self._metadata
        return _CallDetails(details.method, details.timeout, metadata, details.credentials,
                            getattr(details, "wait_for_ready", None), getattr(details, "compression", None))

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._with_key(details), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._with_key(details), request)


ROUTE_HEADER = "x-kvsession-route"
REPLICA_HEADER = "x-kvsession-replica"
_ROUTE_KEY = re.compile(r"(?:ses|ckpt)_([A-Za-z0-9_-]{1,64})\.")


def route_key(id_):
    """The route key of "ses_KEY.HEX" / "ckpt_KEY.HEX" (docs/fleet.md); None without one."""
    m = _ROUTE_KEY.match(id_ or "")
    return m.group(1) if m else None


class _Route(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    """Adds `x-kvsession-route: KEY` from the id a request names (its
    checkpoint_id, else its session_id), so a proxy in front of a fleet
    sends the call to the replica that holds it. CreateSession names no id:
    no header, the proxy picks a replica. A call on this channel whose
    request is not a message (raw bytes) passes unchanged."""

    @staticmethod
    def _routed(details, request):
        key = None
        fields = getattr(getattr(type(request), "DESCRIPTOR", None), "fields_by_name", {})
        for field in ("checkpoint_id", "session_id"):
            if key is None and field in fields:
                key = route_key(getattr(request, field))
        if key is None:
            return details
        metadata = [m for m in (details.metadata or []) if m[0] != ROUTE_HEADER] + [(ROUTE_HEADER, key)]
        return _CallDetails(details.method, details.timeout, metadata, details.credentials,
                            getattr(details, "wait_for_ready", None), getattr(details, "compression", None))

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._routed(details, request), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._routed(details, request), request)


class _CallDetails(grpc.ClientCallDetails):
    def __init__(self, method, timeout, metadata, credentials, wait_for_ready, compression):
        self.method, self.timeout, self.metadata = method, timeout, metadata
        self.credentials, self.wait_for_ready, self.compression = credentials, wait_for_ready, compression


def _read(path):
    with open(path, "rb") as f:
        return f.read()


class Client:
    """Synchronous client; every method raises grpc.RpcError on failure.

    TLS when `tls_ca` (the server's CA, PEM file) or `tls` (the system's
    roots) is given; `tls_cert` / `tls_key` add a client certificate (mutual
    TLS). `api_key` (default: $KVSESSION_API_KEY) is sent as
    `authorization: Bearer KEY` on every call. `as_tenant` (an admin key
    only) makes every call tenant `as_tenant`'s (x-kvsession-tenant). Every call naming a session
    or checkpoint carries its route key (x-kvsession-route, docs/fleet.md).
    """

    def __init__(self, address, timeout=60.0, tls_ca=None, tls_cert=None, tls_key=None,
                 api_key=None, tls=False, as_tenant=None):
        if tls or tls_ca or tls_cert:
            credentials = grpc.ssl_channel_credentials(
                root_certificates=_read(tls_ca) if tls_ca else None,
                private_key=_read(tls_key) if tls_key else None,
                certificate_chain=_read(tls_cert) if tls_cert else None)
            self.channel = grpc.secure_channel(address, credentials)
        else:
            self.channel = grpc.insecure_channel(address)
        api_key = api_key or os.environ.get("KVSESSION_API_KEY")
        interceptors = [_Route()]
        if api_key or as_tenant:
            interceptors.append(_ApiKey(api_key, as_tenant))
        self.channel = grpc.intercept_channel(self.channel, *interceptors)
        self.stub = pb_grpc.KvSessionStub(self.channel)
        self.timeout = timeout

    def wait_ready(self, timeout=10.0):
        grpc.channel_ready_future(self.channel).result(timeout=timeout)

    def create(self, text=None, labels=None, **sampling_kwargs):
        req = pb.CreateSessionRequest(sampling=sampling(**sampling_kwargs), labels=labels or {})
        if text:
            req.input.CopyFrom(text_input(text))
        return self.stub.CreateSession(req, timeout=self.timeout).id

    def append(self, session_id, text):
        return self.stub.Append(pb.AppendRequest(session_id=session_id, input=text_input(text)),
                                timeout=self.timeout)

    def generate(self, session_id, max_tokens=128, prompt=None, stop=(), top_logprobs=0,
                 **sampling_kwargs):
        """Yields GenerateResponse messages as the server streams them."""
        req = pb.GenerateRequest(session_id=session_id, max_tokens=max_tokens,
                                 sampling=sampling(**sampling_kwargs), stop=list(stop),
                                 top_logprobs=top_logprobs)
        if prompt:
            req.input.CopyFrom(text_input(prompt))
        return self.stub.Generate(req, timeout=self.timeout)

    def generate_all(self, session_id, max_tokens=128, **kwargs):
        """Runs a generation to the end: (token ids, text, final message)."""
        ids, text, last = [], "", None
        for message in self.generate(session_id, max_tokens, **kwargs):
            ids.extend(message.token_ids)
            text += message.text
            last = message
        return ids, text, last

    def fork(self, session_id, count, seeds=(), at_length=None):
        request = pb.ForkRequest(session_id=session_id, count=count, seeds=list(seeds))
        if at_length is not None:
            request.at_length = at_length  # branch from the first at_length tokens
        resp = self.stub.Fork(request, timeout=self.timeout)
        return [s.id for s in resp.sessions]

    def truncate(self, session_id, length):
        """Keeps the session's first `length` tokens; returns the TruncateResponse."""
        return self.stub.Truncate(pb.TruncateRequest(session_id=session_id, length=length),
                                  timeout=self.timeout)

    def snapshot(self, session_id, name=""):
        return self.stub.Snapshot(pb.SnapshotRequest(session_id=session_id, name=name),
                                  timeout=self.timeout)

    def restore_checkpoint(self, checkpoint_id):
        return self.stub.Restore(pb.RestoreRequest(checkpoint_id=checkpoint_id), timeout=self.timeout).id

    def restore_session(self, session_id):
        return self.stub.Restore(pb.RestoreRequest(session_id=session_id), timeout=self.timeout)

    def get(self, session_id, include_token_ids=False, include_text=False):
        return self.stub.GetSession(pb.GetSessionRequest(session_id=session_id,
                                                         include_token_ids=include_token_ids,
                                                         include_text=include_text),
                                    timeout=self.timeout)

    def delete(self, session_id):
        self.stub.DeleteSession(pb.DeleteSessionRequest(session_id=session_id), timeout=self.timeout)

    def info(self):
        return self.stub.GetServerInfo(pb.GetServerInfoRequest(), timeout=self.timeout)
