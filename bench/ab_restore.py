#!/usr/bin/env python3
"""The server's own restore time of two or more kvsessiond builds, alternating.

    python3 bench/ab_restore.py ROUNDS OLD_KVSESSIOND NEW_KVSESSIOND [...] -- --model M.gguf [SERVER_FLAGS]

Stores one long session (about --tokens tokens of text, default 2,000)
with the first build, then, ROUNDS times, starts each build in turn on
that store (the order reversed every other round, so neither build always
runs first on a shared, noisy machine), restores the session with
`kvsession restore`, and reads the server's
kvsession_session_restore_duration_seconds_sum from its --metrics-listen
endpoint: the restore alone (reading, checking and placing the pages),
without the call, the client or the process start around it. Each start
is a fresh process, so the sum is that one restore.

With --store-per-build each build stores the session in a store of its
own (the same text, so the same KV): for builds of different store
formats, which cannot share one store.

Before each start the store's files are read into the page cache (warm),
or with --cold dropped from it (posix_fadvise DONTNEED; the disk's own
cache aside). Without --store-per-build the builds must read the same
store format.

Prints a Markdown table: per build, every round's figure in ms and their
median; the last build's median over the first's; and in how many rounds
the last build's figure was below / above the first's. Needs only Python
3 and the kvsession CLI (--cli, default build/bin/kvsession).

    python3 bench/ab_restore.py 7 old/bin/kvsessiond build/bin/kvsessiond -- \\
        --model /work/bench-models/qwen3-0.6b-gpt2-q8_0.gguf --kv-type q8_0 \\
        --max-context 4096 --kv-cache-mb 512
"""
import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

METRIC = re.compile(r'^kvsession_session_restore_duration_seconds_(sum|count)(?:\{[^}]*\})?\s+([0-9.eE+-]+)\s*$', re.M)

RUNNING = []  # kvsessiond processes started and not yet stopped; killed on any exit


def kill_running():
    for process in RUNNING:
        if process.poll() is None:
            process.kill()
            process.wait()
    RUNNING.clear()


def wait_for_file(path, process, seconds=120):
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        if os.path.exists(path) and open(path).read().strip():
            return open(path).read().strip()
        if process.poll() is not None:
            sys.exit(f'{process.args[0]} exited ({process.returncode}) before serving')
        time.sleep(0.02)
    sys.exit(f'{process.args[0]} did not serve within {seconds} s')


class Server:
    """One kvsessiond process on loopback ports the kernel picks."""

    def __init__(self, binary, data_dir, flags, log):
        self.port_file = data_dir + '.port'
        self.metrics_port_file = data_dir + '.metrics-port'
        for f in (self.port_file, self.metrics_port_file):
            if os.path.exists(f):
                os.remove(f)
        self.process = subprocess.Popen(
            [binary, '--listen', '127.0.0.1:0', '--port-file', self.port_file, '--metrics-listen', '127.0.0.1:0',
             '--metrics-port-file', self.metrics_port_file, '--data-dir', data_dir] + flags,
            stdout=log, stderr=log)
        RUNNING.append(self.process)
        self.address = '127.0.0.1:' + wait_for_file(self.port_file, self.process)
        self.metrics = 'http://127.0.0.1:' + wait_for_file(self.metrics_port_file, self.process) + '/metrics'

    def restore_seconds(self):
        """The one restore's time: the histogram's sum, its count 1."""
        text = urllib.request.urlopen(self.metrics, timeout=10).read().decode()
        found = {kind: float(value) for kind, value in METRIC.findall(text)}
        if found.get('count') != 1 or 'sum' not in found:
            sys.exit(f'expected one restore in the server\'s metrics, found {found.get("count", 0):.0f}')
        return found['sum']

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            sys.exit(f'{self.process.args[0]} did not stop within 120 s of SIGTERM')
        RUNNING.remove(self.process)
        if code != 0:
            sys.exit(f'{self.process.args[0]} exited with {code}')


def cli(args, *command):
    out = subprocess.run([args.cli] + list(command), capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f'kvsession {command[0]} failed: {out.stderr.strip()[:500]}')
    return out.stdout.strip()


def page_cache(data_dir, cold):
    for root, _, files in os.walk(data_dir):
        for name in files:
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
            try:
                if cold:  # (DONTNEED keeps dirty pages: written back first)
                    os.fdatasync(fd)
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                else:
                    while os.read(fd, 1 << 20):
                        pass
            finally:
                os.close(fd)


def main():
    argv = sys.argv[1:]
    if '--' not in argv:
        sys.exit(__doc__)
    cut = argv.index('--')
    parser = argparse.ArgumentParser(usage=__doc__)
    parser.add_argument('rounds', type=int)
    parser.add_argument('binaries', nargs='+')
    parser.add_argument('--tokens', type=int, default=2000, help='the stored session\'s length, about')
    parser.add_argument('--cold', action='store_true', help='drop the store from the page cache before each start')
    parser.add_argument('--store-per-build', action='store_true',
                        help='each build stores the session in a store of its own (builds of different formats)')
    parser.add_argument('--cli', default=os.path.join(os.path.dirname(__file__), '..', 'build', 'bin', 'kvsession'))
    args = parser.parse_args(argv[:cut])
    flags = argv[cut + 1:]
    if len(args.binaries) < 2:
        sys.exit('give at least two kvsessiond binaries')
    if args.rounds < 1:
        sys.exit('ROUNDS must be at least 1')

    scratch = tempfile.mkdtemp(prefix='kvs-ab-restore-')
    log = open(os.path.join(scratch, 'servers.log'), 'ab')
    # Text of about args.tokens tokens: common English words, a token each
    # in the GPT-2, Llama and Qwen vocabularies.
    common = ['the', 'of', 'and', 'to', 'in', 'is', 'was', 'for', 'on', 'that']
    text = ' '.join(common[i % len(common)] for i in range(args.tokens))

    def store(binary, data_dir):
        """Stores the session with `binary` in `data_dir`: its id and length."""
        server = Server(binary, data_dir, flags, log)
        session = cli(args, 'create', '--server', server.address, '--text', text)
        shown = cli(args, 'show', '--server', server.address, '--session', session, '--json')
        length = re.search(r'"length":\s*"?(\d+)', shown)
        server.stop()
        tokens = int(length.group(1)) if length else 0
        if tokens < args.tokens // 2:
            sys.exit(f'the stored session holds {tokens} tokens')
        return session, tokens

    try:
        # Per build: its store's directory and the session in it.
        if args.store_per_build:
            data_dirs = [os.path.join(scratch, f'store-{b}') for b in range(len(args.binaries))]
            stored = [store(binary, d) for binary, d in zip(args.binaries, data_dirs)]
        else:
            data_dirs = [os.path.join(scratch, 'store')] * len(args.binaries)
            stored = [store(args.binaries[0], data_dirs[0])] * len(args.binaries)
        tokens = stored[0][1]
        if any(t != tokens for _, t in stored):
            sys.exit(f'the builds stored sessions of different lengths: {[t for _, t in stored]}')

        figures = [[] for _ in args.binaries]  # ms per round, by position (a build may be given twice)
        order = list(range(len(args.binaries)))
        for r in range(args.rounds):
            for b in order if r % 2 == 0 else order[::-1]:
                page_cache(data_dirs[b], args.cold)
                server = Server(args.binaries[b], data_dirs[b], flags, log)
                cli(args, 'restore', '--server', server.address, '--session', stored[b][0])
                figures[b].append(1000 * server.restore_seconds())
                server.stop()
    finally:
        kill_running()
        log.close()
        shutil.rmtree(scratch, ignore_errors=True)

    first, last = figures[0], figures[-1]
    print(f'\nserver-side restore of a {tokens}-token session, page cache {"cold" if args.cold else "warm"}, '
          f'{args.rounds} rounds; server flags: {" ".join(flags)}\n')
    print('| build | ms per round | median ms |')
    print('|---|---|---|')
    for b, binary in enumerate(args.binaries):
        print(f'| {binary} | {" ".join(f"{x:.1f}" for x in figures[b])} | {statistics.median(figures[b]):.1f} |')
    below = sum(1 for a, b in zip(first, last) if b < a)
    above = sum(1 for a, b in zip(first, last) if b > a)
    print(f'\nlast / first: {statistics.median(last) / statistics.median(first):.2f}; '
          f'the last build below / above the first in {below} / {above} of {args.rounds} rounds')


if __name__ == '__main__':
    main()
