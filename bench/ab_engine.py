#!/usr/bin/env python3
"""Side-by-side kvs-bench runs of two or more builds, alternating.

    python3 bench/ab_engine.py ROUNDS OLD_KVS_BENCH NEW_KVS_BENCH [...] -- KVS_BENCH_ARGS

Runs every kvs-bench binary ROUNDS times with the same arguments (those
after --), the order reversed every other round so neither build always
runs first on a shared, noisy machine; one round is one pair (or one set).
From each run it reads the table's rows whose value is a rate (tok/s,
rows/s) or the memory read bandwidth (GB/s). Prints a Markdown table: per
row and build, every run's figure and their median; the last build's
median over the first's; and in how many rounds the last build's figure
was above / below the first's. A row whose code did not change shows this
machine's noise: compare the others against it. Needs only Python 3.

    python3 bench/ab_engine.py 6 old/kvs-bench new/kvs-bench -- \\
        --model qwen3-0.6b-gpt2-q8_0.gguf --kv-type q8_0 --runs 3 --long 16 \\
        --prefill-lengths 512 --prefill-runs 1
"""
import collections
import re
import statistics
import subprocess
import sys

# "| decode, context 0 | 54.6 tok/s | roofline efficiency 84% |"
ROW = re.compile(r'^\|\s*([^|]+?)\s*\|\s*([0-9.]+) (tok/s|rows/s|GB/s)\s*\|')


def parse_rows(text):
    """The rate rows of one kvs-bench table: [(measure, value, unit)]."""
    return [(m.group(1), float(m.group(2)), m.group(3))
            for m in (ROW.match(line) for line in text.splitlines()) if m]


def main():
    argv = sys.argv[1:]
    if '--' not in argv or argv.index('--') < 3:
        sys.exit(__doc__)
    split = argv.index('--')
    rounds, binaries, bench_args = int(argv[0]), argv[1:split], argv[split + 1:]
    figures = collections.defaultdict(list)  # (measure, binary) -> one figure per round
    units, order = {}, []
    for r in range(rounds):
        for binary in binaries if r % 2 == 0 else binaries[::-1]:
            run = subprocess.run([binary] + bench_args, capture_output=True, text=True)
            if run.returncode != 0:
                sys.exit(f'{binary} exited with {run.returncode}:\n{run.stderr[-2000:]}')
            for measure, value, unit in parse_rows(run.stdout):
                if measure not in units:
                    units[measure] = unit
                    order.append(measure)
                figures[(measure, binary)].append(value)
        print(f'round {r + 1} of {rounds} done', file=sys.stderr)
    first, last = binaries[0], binaries[-1]
    print('| row | ' + ' | '.join(f'{b}: runs (median)' for b in binaries) + ' | last / first | rounds up / down |')
    print('|---' * (len(binaries) + 3) + '|')
    for measure in order:
        cells = []
        for b in binaries:
            runs = figures[(measure, b)]
            cells.append(', '.join(f'{v:g}' for v in runs) + f' ({statistics.median(runs):g})' if runs else '-')
        old, new = figures[(measure, first)], figures[(measure, last)]
        if not old or not new:
            continue
        ratio = statistics.median(new) / statistics.median(old)
        up = sum(n > o for o, n in zip(old, new))
        down = sum(n < o for o, n in zip(old, new))
        print(f'| {measure}, {units[measure]} | ' + ' | '.join(cells) + f' | {ratio:.3f} | {up} / {down} |')


if __name__ == '__main__':
    main()
