"""A small Python client for kvsession, built on Debian's python3-grpcio.

The gRPC stubs are generated from proto/kvsession/v1/kvsession.proto at
import time with Debian's protoc and grpc_python_plugin (packages
protobuf-compiler and protobuf-compiler-grpc) into a private per-user cache
directory ($XDG_CACHE_HOME or ~/.cache, then kvsession-py/<proto hash>), so
nothing generated is checked in. See _load_stubs for what is trusted there.

    from kvsession_client import Client
    c = Client("127.0.0.1:50051")
    sid = c.create("Once upon a time")
    for chunk in c.generate(sid, max_tokens=32, temperature=0):
        print(chunk.text, end="", flush=True)
"""

import atexit
import hashlib
import importlib.machinery
import importlib.util
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import warnings

import grpc

_HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_ROOT = os.path.normpath(os.path.join(_HERE, "..", "..", "proto"))
PROTO_FILE = "kvsession/v1/kvsession.proto"
_STUB_PACKAGE = "kvsession.v1"
_STUB_MODULES = ("kvsession_pb2", "kvsession_pb2_grpc")  # in import order


def _cache_home():
    """$XDG_CACHE_HOME when set to an absolute path, else ~/.cache; None
    when there is no home directory."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(xdg):
        return xdg
    home = os.path.expanduser("~")
    return os.path.join(home, ".cache") if os.path.isabs(home) else None


def _private(path, want_dir):
    """True when `path` itself (not followed if a symlink) is a directory
    (`want_dir`) or a regular file owned by this user that neither its group
    nor others may write."""
    st = os.lstat(path)
    kind = stat.S_ISDIR if want_dir else stat.S_ISREG
    return kind(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022


def _private_tree(path):
    """True when only this user can change anything under `path`: it and
    every entry below it are _private directories or regular files (a
    symlink, device or fifo anywhere fails). False if it cannot be read."""
    try:
        if not _private(path, True):
            return False
        for root, dirs, files in os.walk(path, onerror=_raise):
            for name in dirs:
                if not _private(os.path.join(root, name), True):
                    return False
            for name in files:
                if not _private(os.path.join(root, name), False):
                    return False
        return True
    except OSError:
        return False


def _raise(error):
    raise error


def _safe_ancestors(path):
    """True when no other user can rename or replace a directory above the
    absolute, symlink-free `path`: each is owned by this user or root and is
    writable by neither group nor others, or is sticky (as /tmp)."""
    parent = os.path.dirname(path)
    while True:
        st = os.lstat(parent)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid not in (os.geteuid(), 0):
            return False
        if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
            return False
        if os.path.dirname(parent) == parent:
            return True
        parent = os.path.dirname(parent)


def _complete(out):
    return all(os.path.isfile(os.path.join(out, *_STUB_PACKAGE.split("."), name + ".py"))
               for name in _STUB_MODULES)


def _generate(out):
    """Runs protoc into the existing private directory `out`, then makes
    everything it wrote readable and writable by this user only."""
    subprocess.run(
        ["protoc", "-I", PROTO_ROOT, "--python_out=" + out, "--grpc_out=" + out,
         "--plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin", PROTO_FILE],
        check=True)
    for root, dirs, files in os.walk(out):
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o700)
        for name in files:
            os.chmod(os.path.join(root, name), 0o600)


def _cached_stubs(digest):
    """The per-user cache directory holding the stubs of proto version
    `digest` (generated first when missing), or None when no cache can be
    trusted. The cache, <cache home>/kvsession-py, is created 0700 and is
    used only when it is this user's, writable by nobody else, and below
    directories nobody else can replace. Its <digest> directory is used
    only when its whole tree is this user's and writable by nobody else;
    otherwise it is moved aside (with a warning) and generated anew. A
    directory is generated in a fresh private temporary directory in the
    cache and renamed into place whole, so a reader never sees it half
    written; a process that loses the race to rename uses the winner's."""
    home = _cache_home()
    if home is None:
        return None
    try:
        os.makedirs(home, exist_ok=True)
        base = os.path.join(os.path.realpath(home), "kvsession-py")
        try:
            os.mkdir(base, 0o700)
        except FileExistsError:
            pass
        if not (_private(base, True) and _safe_ancestors(base)):
            warnings.warn("kvsession_client: not using the stub cache %s: it is not this "
                          "user's alone (owner, mode or a parent directory)" % base, RuntimeWarning)
            return None
        out = os.path.join(base, digest)
        if os.path.lexists(out):
            if _private_tree(out) and _complete(out):
                return out
            warnings.warn("kvsession_client: not using the stubs in %s: not this user's "
                          "alone or incomplete; generating them again" % out, RuntimeWarning)
            stale = os.path.join(base, ".stale-" + os.urandom(8).hex())
            try:
                os.rename(out, stale)  # base is ours: this works whoever owns `out`
            except FileNotFoundError:
                pass  # another process moved it first
            else:
                if os.path.isdir(stale) and not os.path.islink(stale):
                    shutil.rmtree(stale, ignore_errors=True)
                else:
                    os.unlink(stale)
        fresh = tempfile.mkdtemp(prefix=".tmp-", dir=base)
        try:
            _generate(fresh)
            try:
                os.rename(fresh, out)
                fresh = None
            except OSError:
                pass  # another process renamed its directory into place first
        finally:
            if fresh is not None:
                shutil.rmtree(fresh, ignore_errors=True)
        return out if _private_tree(out) and _complete(out) else None
    except OSError:
        return None


class _SourceOnlyLoader(importlib.machinery.SourceFileLoader):
    """Loads a generated module from its .py only: no __pycache__ is read or
    written, so the verified stub directory stays as it was generated."""

    def path_stats(self, path):
        raise OSError("no bytecode cache for generated stubs")


def _import_stubs(out):
    """Imports kvsession.v1.kvsession_pb2 and _pb2_grpc from the files under
    `out` without putting `out` on sys.path: both are registered in
    sys.modules under those names (the _grpc module imports the other by
    its name), below path-less kvsession and kvsession.v1 packages unless
    those are already imported. A module already imported is reused."""
    parts = _STUB_PACKAGE.split(".")
    for i in range(1, len(parts) + 1):
        name = ".".join(parts[:i])
        if name not in sys.modules:
            package = importlib.util.module_from_spec(
                importlib.machinery.ModuleSpec(name, None, is_package=True))
            sys.modules[name] = package
            if i > 1:
                setattr(sys.modules[".".join(parts[:i - 1])], parts[i - 1], package)
    modules = []
    for name in _STUB_MODULES:
        full = _STUB_PACKAGE + "." + name
        module = sys.modules.get(full)
        if module is None:
            path = os.path.join(out, *parts, name + ".py")
            spec = importlib.util.spec_from_file_location(full, path, loader=_SourceOnlyLoader(full, path))
            module = importlib.util.module_from_spec(spec)
            sys.modules[full] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[full]
                raise
            setattr(sys.modules[_STUB_PACKAGE], name, module)
        modules.append(module)
    return modules


def _load_stubs():
    """Generates (once per proto version and user) and imports the Python
    stubs. Only a directory that this user alone can change is trusted
    (_cached_stubs); when the cache cannot be used (no writable home, or a
    cache others can write) the stubs are generated into a fresh
    tempfile.mkdtemp directory, removed at exit."""
    with open(os.path.join(PROTO_ROOT, PROTO_FILE), "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    out = _cached_stubs(digest)
    if out is None:
        out = tempfile.mkdtemp(prefix="kvsession-py-")
        atexit.register(shutil.rmtree, out, True)
        _generate(out)
    pb2, pb2_grpc = _import_stubs(out)
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


def _check_tls(tls_ca, tls_cert, tls_key):
    """Raises ValueError for TLS settings that would otherwise connect with
    less security than asked for: a path given as an empty string (None is
    "not given"), or a client certificate without its key or a key without
    its certificate."""
    for name, value in (("tls_ca", tls_ca), ("tls_cert", tls_cert), ("tls_key", tls_key)):
        if value is not None and not os.fspath(value):
            raise ValueError("%s is empty: give a PEM file path, or None for none" % name)
    if (tls_cert is None) != (tls_key is None):
        raise ValueError("tls_cert and tls_key go together (mutual TLS): %s was given without %s"
                         % (("tls_cert", "tls_key") if tls_key is None else ("tls_key", "tls_cert")))


class Client:
    """Synchronous client; every method raises grpc.RpcError on failure.

    TLS when `tls_ca` (the server's CA, PEM file) or `tls` (the system's
    roots) is given; `tls_cert` and `tls_key` (both, or neither) add a
    client certificate (mutual TLS, over the system's roots unless
    `tls_ca`). None means not given; an empty path, or a certificate
    without its key or a key without its certificate, is a ValueError (never
    a quietly insecure channel). `api_key` (default: $KVSESSION_API_KEY) is
    sent as `authorization: Bearer KEY` on every call. `as_tenant` (an admin key
    only) makes every call tenant `as_tenant`'s (x-kvsession-tenant). Every call naming a session
    or checkpoint carries its route key (x-kvsession-route, docs/fleet.md).

    Deadlines: `timeout` (seconds, default 60) bounds each unary call.
    `stream_timeout` bounds each whole streaming call (generate), default
    None: no deadline, as a long generation on a slow CPU may take any time;
    generate(timeout=) sets one for a single call.
    """

    def __init__(self, address, timeout=60.0, tls_ca=None, tls_cert=None, tls_key=None,
                 api_key=None, tls=False, as_tenant=None, stream_timeout=None):
        _check_tls(tls_ca, tls_cert, tls_key)
        if tls or tls_ca is not None or tls_cert is not None:
            credentials = grpc.ssl_channel_credentials(
                root_certificates=_read(tls_ca) if tls_ca is not None else None,
                private_key=_read(tls_key) if tls_key is not None else None,
                certificate_chain=_read(tls_cert) if tls_cert is not None else None)
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
        self.stream_timeout = stream_timeout

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
                 timeout=None, **sampling_kwargs):
        """Yields GenerateResponse messages as the server streams them.

        The whole stream's deadline is `timeout` seconds when given, else the
        client's `stream_timeout` (default None: no deadline; not the unary
        `timeout`). The returned iterator is also a grpc.Call: its cancel()
        ends the generation early."""
        req = pb.GenerateRequest(session_id=session_id, max_tokens=max_tokens,
                                 sampling=sampling(**sampling_kwargs), stop=list(stop),
                                 top_logprobs=top_logprobs)
        if prompt:
            req.input.CopyFrom(text_input(prompt))
        return self.stub.Generate(req, timeout=self.stream_timeout if timeout is None else timeout)

    def generate_all(self, session_id, max_tokens=128, **kwargs):
        """Runs a generation to the end: (token ids, text, final message).
        Takes generate's arguments (timeout: the whole generation's deadline)."""
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
