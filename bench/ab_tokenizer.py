#!/usr/bin/env python3
"""Two builds of kvs-bench-tokenizer side by side: each row's median time
over ROUNDS rounds that alternate the binaries, and the ratio old/new.

    python3 bench/ab_tokenizer.py OLD_BINARY NEW_BINARY [FILTER] [ROUNDS]

FILTER is a --benchmark_filter regex (default: every row); ROUNDS default 3.
Build the old binary from an older commit (git worktree, then its
kvs-bench-tokenizer target) and pass both paths.
"""
import csv
import io
import statistics
import subprocess
import sys

UNIT_MS = {'ns': 1e-6, 'us': 1e-3, 'ms': 1.0, 's': 1e3}


def run(binary, flt):
    out = subprocess.run([binary, '--benchmark_filter=' + flt, '--benchmark_min_time=0.2',
                          '--benchmark_format=csv'], capture_output=True, text=True, check=True).stdout
    rows = csv.DictReader(io.StringIO(out[out.index('name,'):]))
    return {r['name']: float(r['real_time']) * UNIT_MS[r['time_unit']] for r in rows}


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    binaries = {'old': sys.argv[1], 'new': sys.argv[2]}
    flt = sys.argv[3] if len(sys.argv) > 3 else '.'
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    times = {k: {} for k in binaries}
    for r in range(rounds):
        order = ['old', 'new'] if r % 2 == 0 else ['new', 'old']
        for k in order:
            for name, ms in run(binaries[k], flt).items():
                times[k].setdefault(name, []).append(ms)
    print(f"{'row':45s} {'old ms':>9s} {'new ms':>9s} {'old/new':>8s}")
    for name, old in times['old'].items():
        o, n = statistics.median(old), statistics.median(times['new'][name])
        print(f"{name:45s} {o:9.3f} {n:9.3f} {o / n:8.2f}")


if __name__ == '__main__':
    main()
