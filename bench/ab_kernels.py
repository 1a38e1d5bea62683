#!/usr/bin/env python3
"""Side-by-side kvs-bench-kernels runs of two or more builds, alternating.

    python3 bench/ab_kernels.py FILTER ROUNDS OLD_BINARY NEW_BINARY [...]

Runs every binary ROUNDS times with --benchmark_filter=FILTER, the order
reversed every other round so neither build always runs first on a shared,
noisy machine. Each run reports its median of the case's repetitions; the
table gives, per case and build, the smallest and the median of those
ROUNDS medians in microseconds, and the last build's median over the
first's. Prints a Markdown table; needs only Python 3.
"""
import collections
import json
import statistics
import subprocess
import sys


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    pattern, rounds, binaries = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    medians = collections.defaultdict(list)  # (case, binary) -> run medians, us
    for r in range(rounds):
        for binary in binaries if r % 2 == 0 else binaries[::-1]:
            out = subprocess.run([binary, '--benchmark_filter=' + pattern, '--benchmark_format=json'],
                                 capture_output=True, text=True, check=True).stdout
            for b in json.loads(out)['benchmarks']:
                if b['name'].endswith('_median'):
                    scale = {'ns': 1e-3, 'us': 1.0, 'ms': 1e3, 's': 1e6}[b['time_unit']]
                    medians[(b['run_name'].split('/repeats')[0], binary)].append(b['real_time'] * scale)
    print('| case | ' + ' | '.join(f'{b} min / median' for b in binaries) + ' | last / first |')
    print('|---' * (len(binaries) + 2) + '|')
    for case in sorted({c for c, _ in medians}):
        cells = [f'{min(medians[(case, b)]):.0f} / {statistics.median(medians[(case, b)]):.0f}' for b in binaries]
        ratio = statistics.median(medians[(case, binaries[-1])]) / statistics.median(medians[(case, binaries[0])])
        print(f'| {case} | ' + ' | '.join(cells) + f' | {ratio:.2f} |')


if __name__ == '__main__':
    main()
