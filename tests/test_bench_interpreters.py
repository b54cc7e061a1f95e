"""python -m minloop bench's interpreters group (minloop/bench/interpreters.py).

Tiny sizes: these check that the group runs and reports sane figures where
sub-interpreters with their own GIL exist (3.14+), and that elsewhere it
says why it cannot run and is skipped (n/a), not failed.  Never how fast.
The ceiling (the workload in N separate processes, run_processes) needs no
sub-interpreters: its own tests run on every Python, though the bench
measures it only beside the interpreters (n/a elsewhere, as the rest).
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
    assert 'interp/procs' not in proc.stdout  # no group table, no ceiling either


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
    # The ceiling: the same workload in 2 processes, the same figures.
    assert sample['rate_procs'] > 0
    assert sample['interp_over_procs'] == pytest.approx(sample['rate'] / sample['rate_procs'])
    assert len(sample['rates_procs']) == 2 and all(r > 0 for r in sample['rates_procs'])
    assert sample['rate_procs'] <= sum(sample['rates_procs']) * 1.000001
    assert 0.0 <= sample['overlap_procs'] <= 1.0 and sample['cpu_util_procs'] > 0
    assert len(sample['collections_procs']) == 3
    assert sample['other_load_procs'] is None or sample['other_load_procs'] >= 0


# The ceiling's processes: run on every Python (no sub-interpreter in them).

@pytest.mark.parametrize('loop_name', ['asyncio', 'minloop'])
@pytest.mark.parametrize('workload', sorted(interpreters.SETUPS))
def test_each_workload_runs_in_two_processes_at_once(workload, loop_name):
    got = interpreters.run_processes(workload, loop_name, 2_000, 2, timeout=120)
    assert 'error' not in got and 'unsupported' not in got, got
    assert got['problems'] == []
    assert len(got['rates']) == 2 and all(r > 0 for r in got['rates'])
    # The aggregate: both processes' operations over the union of their
    # windows (one clock for the machine), at most the sum of their rates.
    assert got['rate'] == pytest.approx(4_000 / got['seconds'])
    assert got['rate'] <= sum(got['rates']) * 1.000001
    assert 0.0 <= got['overlap'] <= 1.0 and got['cpu_util'] > 0
    assert got['other_load'] is None or 0.0 <= got['other_load'] <= 1.0


def test_one_process_is_its_own_window():
    got = interpreters.run_processes('call_soon_chain', 'minloop', 1_000, 1, timeout=120)
    assert 'error' not in got, got
    assert got['overlap'] == 1.0 and got['rate'] == pytest.approx(got['rates'][0])


def test_a_process_that_ends_before_ready_is_an_error_not_a_hang():
    got = interpreters.run_processes('no_such_workload', 'minloop', 1_000, 2, timeout=60)
    assert set(got) == {'error'}
    assert 'ended before it was ready (exit status 2)' in got['error']
    assert 'invalid choice' in got['error']  # the child's last word


def test_a_loop_that_cannot_start_is_each_processs_error():
    got = interpreters.run_processes('call_soon_chain', 'no-such-loop', 1_000, 2, timeout=60)
    assert set(got) == {'error'}
    assert 'process 1 of 2:' in got['error'] and 'process 2 of 2:' in got['error']
    assert "unknown loop 'no-such-loop'" in got['error']


def test_the_tables_and_figures_from_samples(capsys):
    """summarise/print_report on made-up samples: medians, the rounds' own
    ratios and their range, minloop over asyncio in processes; 80 columns."""
    def sample(rate_1, rate, rate_procs):
        return {'rate': rate, 'rate_1': rate_1, 'scaling': rate / rate_1,
                'overlap': 0.99, 'cpu_util': 1.9, 'cpu_util_1': 1.0, 'other_load': 0.01,
                'rate_procs': rate_procs, 'interp_over_procs': rate / rate_procs,
                'overlap_procs': 0.98, 'cpu_util_procs': 1.95, 'other_load_procs': None}

    cells = {'asyncio': {'samples': [sample(1e6, 1.5e6, 2e6), sample(1e6, 1.2e6, 1.5e6),
                                     sample(1e6, 1.6e6, 1.6e6)]},
             'minloop': {'samples': [sample(4e6, 5e6, 6e6), sample(4e6, 6e6, 6e6),
                                     sample(4e6, 6.6e6, 6e6)]}}
    results = {'interp-soon-chain-1m': {'row': {'group': 'interpreters'}, 'cells': cells},
               'core-row': {'row': {'group': 'core'}, 'cells': {}}}
    interpreters.print_report(results, ['asyncio', 'minloop'], 2)
    out = capsys.readouterr().out
    figures = results['interp-soon-chain-1m']['interpreters']
    a, m = figures['loops']['asyncio'], figures['loops']['minloop']
    assert a['rate_procs'] == 1.6e6 and a['spread_procs'] == pytest.approx(0.5 / 1.6)
    assert a['interp_over_procs'] == 0.8  # of 0.75, 0.8, 1.0: not 1.5M/1.6M
    assert a['interp_over_procs_range'] == [0.75, 1.0]
    assert m['interp_over_procs'] == 1.0 and m['interp_over_procs_range'] == [5 / 6, 1.1]
    assert a['overlap_procs'] == 0.98 and a['cpu_util_procs'] == 1.95
    assert a['other_load_procs'] is None
    assert figures['ref_over']['asyncio']['procs'] == pytest.approx(6e6 / 1.6e6)
    assert 'interpreters' not in results['core-row']
    lines = out.splitlines()
    assert not [line for line in lines if len(line) > 80]
    head = next(i for i, line in enumerate(lines) if line.startswith('row / loop')
                and 'interp/procs' in line)
    assert lines[head].split()[3:6] == ['2', 'interp', '2']
    assert lines[head + 2].split()[:7] == ['asyncio', '1.5M', '27%', '1.6M', '31%',
                                           '0.80x', '(0.75-1.00)']
    assert lines[head + 3].split()[:7] == ['minloop', '6M', '27%', '6M', '0%',
                                           '1.00x', '(0.83-1.10)']
    assert lines[head + 4].split() == ['minloop/asyncio', '4.00x', '3.75x']
    assert '2/1 (range)' in out  # the first table is still there


@needs_interpreters
def test_the_bench_prints_the_groups_table_and_json(tmp_path):
    out = tmp_path / 'bench.json'
    proc = run_cli('--only', 'interp-soon-chain-1m,interp-tcp-protocol-1k', '--quick',
                   '--rounds', '1', '--loops', 'asyncio,minloop', '--interpreters', '2',
                   '--json', str(out))
    assert proc.returncode == 0, proc.stderr
    assert 'in 1 and in 2 own-GIL sub-interpreters' in proc.stdout
    # The tables fit 80 columns; the closing 'wrote <path>' is as long as
    # the path (pytest-xdist's are longer).
    assert not [line for line in proc.stdout.splitlines()
                if len(line) > 80 and not line.startswith('wrote ')]
    row = table_line(proc.stdout, 'interp-soon-chain-1m')
    assert 'FAILED' not in row and 'n/a' not in row
    assert '2/1 (range)' in proc.stdout and 'minloop/asyncio' in proc.stdout
    assert 'then in 2 fresh processes at once (the ceiling)' in ' '.join(proc.stdout.split())
    assert 'interp/procs' in proc.stdout and '2 procs' in proc.stdout
    data = json.loads(out.read_text())
    for rid in ('interp-soon-chain-1m', 'interp-tcp-protocol-1k'):
        figures = data['rows'][rid]['interpreters']
        assert figures['interpreters'] == 2
        for name in ('asyncio', 'minloop'):
            f = figures['loops'][name]
            assert f['rate_1'] > 0 and f['rate_n'] > 0
            # The summary is consistent; no bound on the figures themselves (a
            # timing, and this run is tiny and shares the machine).
            lo, hi = f['scaling_range']
            assert 0 < lo <= f['scaling'] <= hi
            assert f['rate_procs'] > 0 and f['spread_procs'] is not None
            lo, hi = f['interp_over_procs_range']
            assert 0 < lo <= f['interp_over_procs'] <= hi
            assert 0.0 <= f['overlap_procs'] <= 1.0 and f['cpu_util_procs'] > 0
        assert figures['ref_over']['asyncio']['n'] > 0
        assert figures['ref_over']['asyncio']['procs'] > 0
        for sample in data['rows'][rid]['cells']['minloop']['samples']:
            assert sample['interp_over_procs'] == pytest.approx(
                sample['rate'] / sample['rate_procs'])
