#!/usr/bin/env python3
"""Two kvs-bench builds on single rows, in pairs of runs seconds apart.

    python3 bench/ab_rows.py PAIRS OLD_KVS_BENCH NEW_KVS_BENCH ROWS -- KVS_BENCH_ARGS

For each row of ROWS (comma-separated `--one-row` specs: fan-out:8,decode:0,prefill:512) runs PAIRS pairs: the
old build's `--one-row ROW`, then the new one's (the order reversed every other pair), with KVS_BENCH_ARGS (the
model, --kv-type, --runs). Prints, per row: every pair's figures, their medians, the median of the per-pair
ratios new / old, and how many pairs went up / down.

Why: on a shared VM whose memory bandwidth moves between states within minutes (the forty-sixth sitting's Zen 5:
about 84 and about 53 GB/s), whole-suite rounds (ab_engine.py) put one build's round in one state and the other's
in another, and the ratio of their medians measures the VM. A pair of one-row runs takes seconds, so most pairs
sit in one state; their ratios, not the medians of the figures, are what to read. Swings within a pair remain
(a state can change within a 10-second run), so read the up / down counts too.

    python3 bench/ab_rows.py 6 old/build/bin/kvs-bench build/bin/kvs-bench fan-out:8,fan-out:1 -- \\
        --model qwen3-0.6b-gpt2-q8_0.gguf --kv-type q8_0 --runs 3

Needs only Python 3.
"""
import re
import statistics
import subprocess
import sys

RATE = re.compile(r'([0-9.]+) tok/s')


def one_row(binary, row, args):
    """The tok/s of one `kvs-bench --one-row ROW` run."""
    run = subprocess.run([binary, '--one-row', row] + args, capture_output=True, text=True)
    found = RATE.findall(run.stdout + run.stderr)
    if run.returncode != 0 or not found:
        sys.exit(f'{binary} --one-row {row} exited with {run.returncode}:\n{run.stderr[-2000:]}')
    return float(found[-1])


def main():
    argv = sys.argv[1:]
    if '--' not in argv or argv.index('--') != 4:
        sys.exit(__doc__)
    pairs, old, new, rows = int(argv[0]), argv[1], argv[2], argv[3].split(',')
    args = argv[5:]
    print('| row | old tok/s per pair (median) | new tok/s per pair (median) | new / old, median of pairs '
          '| pairs up / down |')
    print('|---|---|---|---|---|')
    for row in rows:
        olds, news, ratios = [], [], []
        for p in range(pairs):
            figures = {}
            for binary in (old, new) if p % 2 == 0 else (new, old):
                figures[binary] = one_row(binary, row, args)
            olds.append(figures[old])
            news.append(figures[new])
            ratios.append(figures[new] / figures[old])
            print(f'{row}: pair {p + 1} of {pairs} done', file=sys.stderr)
        up = sum(r > 1 for r in ratios)
        down = sum(r < 1 for r in ratios)
        cell = lambda xs: ', '.join(f'{x:g}' for x in xs) + f' ({statistics.median(xs):g})'
        print(f'| {row} | {cell(olds)} | {cell(news)} | {statistics.median(ratios):.3f} | {up} / {down} |')


if __name__ == '__main__':
    main()
