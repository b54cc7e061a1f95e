"""python -m minloop bench's interpreters group (minloop/bench/interpreters.py).

Tiny sizes: these check that the group runs and reports sane figures where
sub-interpreters with their own GIL exist (3.14+), and that elsewhere it
says why it cannot run and is skipped (n/a), not failed.  Never how fast.
"""

import json
import subprocess
import sys

import pytest

from minloop.bench import interpreters, options, procs
from minloop.bench.rows import ROWS, Row, select_rows

pytestmark = pytest.mark.timeout(300)

WHY = interpreters.unavailable()
needs_interpreters = pytest.mark.skipif(WHY is not None, reason=WHY or "")
without_interpreters = pytest.mark.skipif(
    WHY is None, reason="this Python has concurrent.interpreters")

GROUP_ROWS = ['interp-soon-chain-1m', 'interp-timers-500k-fire', 'interp-tcp-protocol-1k']
TINY = options.Settings(quick=True, rounds=1, duration=0.05, warmup=0.02,
                        pin=procs.Pinning(False))


def run_cli(*args, timeout=240):
    return subprocess.run([sys.executable, '-m', 'minloop', 'bench', *args],
                          capture_output=True, text=True, timeout=timeout)


def table_line(stdout, rid):
    return next(line for line in stdout.splitlines() if line.startswith(rid + ' '))


def test_the_group_is_its_rows_outside_quick():
    assert [r.id for r in select_rows('interpreters', quick=False)] == GROUP_ROWS
    assert not {r.id for r in select_rows(None, quick=True)} & set(GROUP_ROWS)
    for rid in GROUP_ROWS:
        assert ROWS[rid].workload in interpreters.SETUPS
    assert interpreters.size_of(ROWS['interp-soon-chain-1m'], quick=False) == 1_000_000
    assert interpreters.size_of(ROWS['interp-soon-chain-1m'], quick=True) == 100_000


def test_interpreters_must_be_at_least_one():
    proc = run_cli('--only', 'interpreters', '--interpreters', '0')
    assert proc.returncode == 2 and '--interpreters must be at least 1' in proc.stderr


@without_interpreters
def test_without_sub_interpreters_the_group_says_why_and_is_skipped():
    assert 'concurrent.interpreters' in WHY and 'Python 3.14+' in WHY
    assert interpreters.measure(ROWS['interp-soon-chain-1m'], 'minloop', TINY, 2) == \
        {'na': WHY}
    proc = run_cli('--only', 'interpreters', '--loops', 'asyncio,minloop', '--rounds', '1')
    assert proc.returncode == 0, proc.stderr
    assert 'interpreters rows: cannot run here' in proc.stdout
    for rid in GROUP_ROWS:
        assert table_line(proc.stdout, rid).split()[1:3] == ['n/a', 'n/a']
    assert WHY.split(';')[0] in ' '.join(proc.stdout.split())  # the n/a lines say why
    assert 'FAILED' not in proc.stdout


@needs_interpreters
@pytest.mark.parametrize('loop_name', ['asyncio', 'minloop'])
@pytest.mark.parametrize('workload', sorted(interpreters.SETUPS))
def test_each_workload_runs_in_one_and_in_two_interpreters(workload, loop_name):
    row = Row('interp-tiny', 'interpreters', 'tiny', False, workload=workload, n=3_000)
    sample = interpreters.measure(row, loop_name, TINY, 2)
    assert 'error' not in sample and 'na' not in sample, sample
    assert sample['problems'] == []
    assert sample['rate'] > 0 and sample['rate_1'] > 0
    assert sample['scaling'] == pytest.approx(sample['rate'] / sample['rate_1'])
    assert len(sample['rates']) == 2 and all(r > 0 for r in sample['rates'])
    # The union window holds each interpreter's: the aggregate is at most
    # the sum of their own rates.
    assert sample['rate'] <= sum(sample['rates']) * 1.000001
    assert 0.0 <= sample['overlap'] <= 1.0 and sample['cpu_util'] > 0
    assert sample['n'] == interpreters.SMOKE_N  # a tenth of 3,000, at least SMOKE_N


@needs_interpreters
def test_the_bench_prints_the_groups_table_and_json(tmp_path):
    out = tmp_path / 'bench.json'
    proc = run_cli('--only', 'interp-soon-chain-1m,interp-tcp-protocol-1k', '--quick',
                   '--rounds', '1', '--loops', 'asyncio,minloop', '--interpreters', '2',
                   '--json', str(out))
    assert proc.returncode == 0, proc.stderr
    assert 'in 1 and in 2 own-GIL sub-interpreters' in proc.stdout
    assert not [line for line in proc.stdout.splitlines() if len(line) > 80]
    row = table_line(proc.stdout, 'interp-soon-chain-1m')
    assert 'FAILED' not in row and 'n/a' not in row
    assert '2/1 (range)' in proc.stdout and 'minloop/asyncio' in proc.stdout
    data = json.loads(out.read_text())
    for rid in ('interp-soon-chain-1m', 'interp-tcp-protocol-1k'):
        figures = data['rows'][rid]['interpreters']
        assert figures['interpreters'] == 2
        for name in ('asyncio', 'minloop'):
            f = figures['loops'][name]
            assert f['rate_1'] > 0 and f['rate_n'] > 0
            lo, hi = f['scaling_range']
            assert 0 < lo <= f['scaling'] <= hi < 4
        assert figures['ref_over']['asyncio']['n'] > 0
