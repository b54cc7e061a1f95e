"""python -m minloop bench: the command line, the report and the rows.

Reduced sets (one round, tiny network windows, tiny sizes): these check that
the pieces fit and what the command prints, never how fast anything is.
"""

import importlib.util
import io
import json
import os
import subprocess
import sys

import pytest

from conftest import DAEMON_THREADS

import minloop
from minloop.bench import loops, measure, options, procs, report, runner, workloads
from minloop.bench.rows import ROWS, Row, core_size, other_size, select_rows

# These start interpreters, servers and load generators: seconds each on a
# quiet machine, more on a shared one.
pytestmark = pytest.mark.timeout(120)

BENCH_FAST = ('--quick', '--rounds', '1', '--duration', '0.05', '--loops', 'asyncio,minloop')


def run_cli(*args, env=None, timeout=120):
    return subprocess.run([sys.executable, '-m', 'minloop', *args],
                          capture_output=True, text=True, timeout=timeout, env=env)


def table_line(stdout, rid):
    return next(line for line in stdout.splitlines() if line.startswith(rid + ' '))


def test_bench_quick_prints_the_table_and_writes_json(tmp_path):
    out = tmp_path / 'bench.json'
    proc = run_cli('bench', *BENCH_FAST, '--only', 'call_soon_chain,tcp-protocol-1k-c1',
                   '--json', str(out))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    head = next(line for line in lines if line.startswith('row '))
    assert head.split() == ['row', 'asyncio', 'minloop', 'asyncio']
    assert 'minloop vs' in lines[lines.index(head) - 1]
    for rid in ('call_soon_chain', 'tcp-protocol-1k-c1'):
        row = table_line(proc.stdout, rid)
        assert 'FAILED' not in row and row.rstrip().split()[-1] != '-', row
    assert 'load generator' in proc.stdout and 'server CPU per round trip' in proc.stdout
    assert 'runs in' in proc.stderr  # the progress report's last line

    data = json.loads(out.read_text())
    env = data['environment']
    assert env['minloop'] == minloop.__version__ and env['rounds'] == 1 and env['quick']
    assert env['loops']['minloop']['available'] and 'python' in env
    assert set(data['rows']) == {'call_soon_chain', 'tcp-protocol-1k-c1'}
    core = data['rows']['call_soon_chain']
    (sample,) = core['cells']['minloop']['samples']
    assert sample['round'] == 1 and sample['seconds'] > 0 and sample['rate'] > 0
    assert len(sample['gc']) == 3
    assert core['cells']['asyncio']['median']['rate'] > 0
    assert core['ratios']['asyncio'] > 0
    lo, hi = core['ratio_ranges']['asyncio']
    assert lo == hi == pytest.approx(core['ratios']['asyncio'])  # one round
    net = data['rows']['tcp-protocol-1k-c1']
    (sample,) = net['cells']['minloop']['samples']
    assert sample['round_trips'] > 0 and 0 <= sample['client_cpu']
    assert net['client_cpu_peak'] is not None and net['row']['unit'] == 'round trips/s'


def test_bench_output_fits_80_columns_and_ends_with_a_summary():
    proc = run_cli('bench', *BENCH_FAST, '--only', 'call_soon_chain,timers-1k-fire')
    assert proc.returncode == 0, proc.stderr
    wide = [line for line in proc.stdout.splitlines() if len(line) > 80]
    assert not wide, wide
    tail = proc.stdout.rstrip().splitlines()
    assert tail[-3].startswith('summary: geometric mean per group')
    assert tail[-2].split()[:4] == ['core', tail[-2].split()[1], 'vs', 'asyncio']
    assert tail[-1].split()[0] == 'scale' and '(1 row)' in tail[-1]


def test_bench_plot_without_matplotlib_fails_before_measuring(tmp_path):
    # A matplotlib that cannot be imported shadows any installed one.
    fake = tmp_path / 'fake' / 'matplotlib'
    fake.mkdir(parents=True)
    (fake / '__init__.py').write_text("raise ImportError('No module named matplotlib')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(tmp_path / 'fake')] + [p for p in [os.environ.get('PYTHONPATH')] if p]))
    proc = run_cli('bench', *BENCH_FAST, '--only', 'call_soon_chain',
                   '--plot', str(tmp_path / 'ratios.png'), env=env)
    assert proc.returncode == 2
    assert 'pip install "minloop[plot]"' in proc.stderr
    assert 'runs in' not in proc.stderr and proc.stdout == ''  # nothing was measured
    assert not (tmp_path / 'ratios.png').exists()


def test_bench_row_a_loop_cannot_run_is_na_not_a_failure(tmp_path):
    # An httptools that cannot be imported: the HTTP servers cannot start.
    fake = tmp_path / 'fake' / 'httptools'
    fake.mkdir(parents=True)
    (fake / '__init__.py').write_text("raise ImportError('no httptools here')\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path / 'fake'))
    proc = run_cli('bench', *BENCH_FAST, '--only', 'http-c16', env=env)
    assert proc.returncode == 0, proc.stderr
    assert table_line(proc.stdout, 'http-c16').split()[1:3] == ['n/a', 'n/a']
    assert 'no httptools here' in proc.stdout
    assert 'FAILED' not in proc.stdout


def test_bench_plot_draws_the_ratios(tmp_path):
    pytest.importorskip('matplotlib')
    png = tmp_path / 'ratios.png'
    proc = run_cli('bench', *BENCH_FAST, '--only', 'call_soon_chain', '--plot', str(png))
    assert proc.returncode == 0, proc.stderr
    assert png.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'


def test_bench_unknown_option_is_a_usage_error():
    proc = run_cli('bench', '--no-such-option')
    assert proc.returncode == 2
    assert 'unrecognized arguments: --no-such-option' in proc.stderr


def test_bench_unknown_row_or_loop_is_a_usage_error():
    proc = run_cli('bench', '--only', 'no_such_row')
    assert proc.returncode == 2 and 'no row matches' in proc.stderr
    proc = run_cli('bench', '--loops', 'tokio')
    assert proc.returncode == 2 and 'unknown loop' in proc.stderr


def test_bench_list_names_the_standard_set():
    proc = run_cli('bench', '--list')
    assert proc.returncode == 0
    for rid in ('call_soon_chain', 'call_later_cancel', 'sleep0_pingpong',
                'tcp-protocol-1k-c16', 'tcp-streams-1k-c16', 'http-pipe8-c16',
                'tasks-100k-sleep2', 'timers-200k-cancel-half', 'timers-1k-fire',
                'timers-200k-fire', 'callbacks-1m-chains100', 'tasks-100k-gather'):
        assert rid in proc.stdout
    assert max(map(len, proc.stdout.splitlines())) <= 80


class _Stream(io.StringIO):
    def __init__(self, tty):
        super().__init__()
        self._tty = tty

    def isatty(self):
        return self._tty


@pytest.mark.parametrize('tty', [True, False])
def test_bench_progress_is_one_rewritten_line_on_a_tty(tty):
    stream = _Stream(tty)
    progress = report.Progress(4, stream)
    for row in ('a', 'b'):
        for loop in ('asyncio', 'minloop'):
            progress.show(row, 1, 1, loop)
            progress.step()
    progress.finish()
    text = stream.getvalue()
    if tty:
        assert text.count('\r') == 5 and text.count('\n') == 1  # four updates, one clear
    else:
        assert '\r' not in text
        assert text.count('\n') == 3  # one line per row, and the total
    assert text.rstrip().endswith('s') and '4 runs in' in text


def _net_entry(util, server_us=5.0):
    cells = {n: {'samples': [{'rate': 1.0, 'client_util': util, 'round': 1}],
                 'errors': [], 'problems': [], 'na': None, 'spread': 0.0,
                 'median': {'rate': 1.0, 'client_util': util, 'server_us': server_us}}
             for n in ('asyncio', 'minloop')}
    return {'row': {'group': 'net', 'unit': 'round trips/s'}, 'cells': cells,
            'ratios': {'asyncio': 1.0}}


class _Settings:
    rounds = 1
    pin = procs.Pinning()


def test_bench_flags_a_saturated_load_generator():
    results = {'busy-row': _net_entry(0.97), 'calm-row': _net_entry(0.30)}
    details = report.details(results, ['asyncio', 'minloop'])
    assert table_line(details, 'busy-row').endswith('97% sat')
    assert table_line(details, 'calm-row').endswith('30%')
    notes = report.notes(results, ['asyncio', 'minloop'], _Settings)
    assert 'busy-row (97%' in notes and 'not the bottleneck' not in notes
    results = {'calm-row': _net_entry(0.30)}
    assert 'not the bottleneck' in report.notes(results, ['asyncio', 'minloop'], _Settings)


def test_bench_shows_the_servers_user_cpu_where_measured():
    results = {'measured': _net_entry(0.5), 'unmeasured': _net_entry(0.5)}
    results['measured']['cells']['minloop']['median']['server_user_us'] = 1.234
    results['measured']['cells']['asyncio']['median']['server_user_us'] = 3.5
    details = report.details(results, ['asyncio', 'minloop'])
    table = details[details.index("user CPU per round trip"):]
    assert table_line(table, 'measured').split() == ['measured', '3.50', '1.23']
    assert 'unmeasured' not in table  # no user figure: not a row of that table
    del results['measured']
    assert "user CPU per round trip" not in report.details(results, ['asyncio', 'minloop'])


def test_user_cpu_is_pooled_over_rounds_and_says_what_it_is_good_to(monkeypatch):
    # Three short windows of a server that ran 20 ms in each: /proc gave
    # 0, 10 and 20 ms of user time (10 ms units).  The median of the rounds'
    # figures would be one of them; pooled, it is their sum over all the
    # round trips, with an error bound that says it is rough.
    monkeypatch.setattr(procs, '_tick_hz', [(250, True)])

    def cell(windows):
        samples = [{'rate': 1.0, 'round': i + 1, 'round_trips': 2000, 'server_cpu': run,
                    'server_user_cpu': user, 'server_us': run / 2000 * 1e6,
                    'server_user_us': user / 2000 * 1e6}
                   for i, (user, run) in enumerate(windows)]
        c = {'samples': samples, 'errors': [], 'problems': [], 'na': None}
        runner.summarise(c)
        return c

    short = cell([(0.0, 0.02), (0.01, 0.02), (0.02, 0.02)])
    assert short['median']['server_user_us'] == pytest.approx(0.03 / 6000 * 1e6)
    assert short['user_err'] > 0.5
    long = cell([(0.5, 1.0)] * 4)
    assert long['user_err'] == pytest.approx(2 * (0.25 * 4 / 250 + 4e-4 / 6) ** 0.5 / 2)
    assert long['user_err'] < 0.1
    entry = _net_entry(0.5)
    entry['cells'] = {'asyncio': long, 'minloop': short}
    text = report.details({'row-a': entry}, ['asyncio', 'minloop'])
    table = text[text.index('user CPU per round trip'):]
    assert table_line(table, 'row-a').split() == ['row-a', '250.00', '5.00~']
    assert 'good to within' in ' '.join(table.split()) and '250 Hz' in table


# --- the scale rows' workloads, at tiny sizes ---------------------------------

SMOKE_LOOPS = ('asyncio', 'minloop')


@pytest.mark.parametrize('loop_name', SMOKE_LOOPS)
@pytest.mark.parametrize('workload', ['tasks_sleep_twice', 'timers_held_cancel_half',
                                      'timers_fire_due', 'call_soon_chains', 'gather_tasks'])
def test_scale_workload_runs_and_counts_collections(workload, loop_name):
    result = workloads.measure(workloads.WORKLOADS[workload], loops.factory(loop_name), 2000)
    assert result['seconds'] > 0
    assert len(result['gc']) == 3 and all(c >= 0 for c in result['gc'])
    if workload == 'timers_held_cancel_half':
        phases = result['phases_ms']
        assert set(phases) == {'schedule', 'cancel', 'fire'}
        assert all(v >= 0 for v in phases.values())
        assert len(result['gc_fire']) == 3
    if workload == 'timers_fire_due':
        assert result['ns_per_timer'] == pytest.approx(result['seconds'] / 2000 * 1e9)
        assert len(result['gc_fire']) == 3


def test_gc_counter_counts_collections_per_generation():
    with workloads.GC:
        before = workloads.GC.snapshot()
        import gc
        gc.collect(0)
        gc.collect(2)
        assert workloads._since(before) == [1, 0, 1]
    gc.collect()
    assert workloads._since(before) == [1, 0, 1]  # not counting once removed


def test_scale_workloads_catch_a_wrong_outcome():
    # A loop that never runs call_soon callbacks given by call_later's handles
    # cannot pass: verify() notices what did not happen.
    class Lossy(asyncio_loop_type()):
        def call_later(self, delay, callback, *args, **kw):
            handle = super().call_later(delay, callback, *args, **kw)
            if callback.__name__ == 'fire' and not getattr(self, '_dropped', False):
                self._dropped = True
                handle.cancel()
                self.call_later(0.06, self.stop)
            return handle

    with pytest.raises(workloads.Misbehaved, match='firings'):
        workloads.measure(workloads.WORKLOADS['timers_held_cancel_half'], Lossy, 200)


def asyncio_loop_type():
    import asyncio
    return asyncio.SelectorEventLoop


def test_scale_rows_run_whole_in_every_profile():
    for rid in ('tasks-100k-sleep2', 'timers-200k-cancel-half', 'timers-200k-fire',
                'callbacks-1m-chains100', 'tasks-100k-gather'):
        row = ROWS[rid]
        assert row.group == 'scale'
        assert core_size(row, quick=True) == core_size(row, quick=False) == row.n
    assert ROWS['timers-1k-fire'].n == 1000


def test_bench_scale_row_reports_collections():
    proc = run_cli('bench', *BENCH_FAST, '--only', 'timers-1k-fire')
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert 'GC collections during each run' in out
    gc_line = table_line(out.split('GC collections')[1], 'timers-1k-fire')
    assert all(len(cell.split('/')) == 3 for cell in gc_line.split()[1:])


def _scale_entry(workload, n, rid):
    """A results entry for rid from one tiny measurement per loop."""
    cells = {}
    for name in SMOKE_LOOPS:
        sample = workloads.measure(workloads.WORKLOADS[workload], loops.factory(name), n)
        sample.update(rate=n / sample['seconds'], round=1)
        cell = {'samples': [sample], 'errors': [], 'problems': [], 'na': None}
        runner.summarise(cell)
        cells[name] = cell
    entry = {'row': {'group': 'scale', 'unit': 'timers/s'}, 'cells': cells}
    entry['ratios'] = report.ratios(entry)
    return entry


def test_report_shows_the_phases_and_the_firing_cost_per_timer():
    results = {'timers-200k-cancel-half': _scale_entry('timers_held_cancel_half', 2000,
                                                       'timers-200k-cancel-half'),
               'timers-1k-fire': _scale_entry('timers_fire_due', 500, 'timers-1k-fire'),
               'timers-200k-fire': _scale_entry('timers_fire_due', 2000, 'timers-200k-fire')}
    out = report.details(results, list(SMOKE_LOOPS))
    assert max(map(len, out.splitlines())) <= 80
    phases = out.split('by phase')[1].splitlines()
    assert phases[1].split() == ['loop', 'schedule', 'cancel', 'fire', 'GC', 'firing']
    assert [line.split()[0] for line in phases[2:4]] == ['asyncio', 'minloop']
    assert all(len(line.split()) == 5 for line in phases[2:4])
    cost = out.split('per-timer firing cost')[1].splitlines()
    assert cost[1].split()[:4] == ['loop', '1k', '200k', '200k/1k']
    asyncio_line = cost[2].split()
    assert asyncio_line[0] == 'asyncio' and asyncio_line[3].endswith('x')
    small = results['timers-1k-fire']['cells']['asyncio']['median']['rate']
    assert int(asyncio_line[1]) == round(1e9 / small)


# --- the command line refuses early what it could not do late -----------------


def test_bench_rounds_zero_is_refused_like_a_negative_duration():
    proc = run_cli('bench', '--rounds', '0')
    assert proc.returncode == 2 and '--rounds must be at least 1' in proc.stderr
    proc = run_cli('bench', '--duration', '-1')
    assert proc.returncode == 2 and '--duration must be positive' in proc.stderr


def test_bench_list_honours_only():
    proc = run_cli('bench', '--list', '--only', 'timers-*')
    assert proc.returncode == 0
    ids = [line.split()[0] for line in proc.stdout.splitlines()
           if line and not line.startswith((' ', '*'))]
    assert ids == ['timers-200k-cancel-half', 'timers-1k-fire', 'timers-200k-fire']


@pytest.mark.parametrize('option', ['--json', '--plot'])
def test_bench_unwritable_output_is_refused_before_measuring(tmp_path, option):
    name = 'out.json' if option == '--json' else 'out.png'
    proc = run_cli('bench', *BENCH_FAST, '--only', 'call_soon_chain',
                   option, str(tmp_path / 'no' / 'such' / name))
    assert proc.returncode == 2 and 'no such directory' in proc.stderr
    assert proc.stdout == '' and 'Traceback' not in proc.stderr
    proc = run_cli('bench', *BENCH_FAST, '--only', 'call_soon_chain', option, str(tmp_path))
    assert proc.returncode == 2 and 'is a directory' in proc.stderr


def test_bench_plot_format_is_checked_before_measuring(tmp_path):
    pytest.importorskip('matplotlib')
    proc = run_cli('bench', *BENCH_FAST, '--only', 'call_soon_chain',
                   '--plot', str(tmp_path / 'p.txt'))
    assert proc.returncode == 2 and 'must end in one of' in proc.stderr and '.png' in proc.stderr
    assert proc.stdout == '' and not (tmp_path / 'p.txt').exists()


@pytest.mark.main_interpreter("preexec_fn")
def test_bench_interrupted_keeps_the_finished_rounds(tmp_path):
    import signal

    out = tmp_path / 'partial.json'
    proc = subprocess.Popen(
        [sys.executable, '-m', 'minloop', 'bench', '--quick', '--rounds', '2',
         '--loops', 'asyncio,minloop', '--only', 'call_soon_chain,sleep0_pingpong',
         '--json', str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # Python turns SIGINT into KeyboardInterrupt only where the signal
        # was not ignored when it started, and a job run with `&` from a
        # script (CI's, say) starts with it ignored.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    # Not on a terminal, the progress report says each row once as it
    # starts: once the second row starts, the first has all its rounds.
    first = proc.stderr.readline()
    second = proc.stderr.readline()
    assert 'call_soon_chain' in first and 'sleep0_pingpong' in second, (first, second)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert 'Traceback' not in stderr
    interrupted = [line for line in stderr.splitlines() if line.startswith('interrupted')]
    assert len(interrupted) == 1
    assert table_line(stdout, 'call_soon_chain')
    # The report says so before the table, as the header said "median of 2 rounds".
    report_start = stdout.index('INTERRUPTED after')
    assert report_start < stdout.index('call_soon_chain ')
    assert 'medians below are of the rounds that finished' in ' '.join(stdout.split())
    data = json.loads(out.read_text())
    assert data['environment']['interrupted'] is True
    for loop_name in ('asyncio', 'minloop'):
        samples = data['rows']['call_soon_chain']['cells'][loop_name]['samples']
        assert [s['round'] for s in samples] == [1, 2]
    pingpong = data['rows'].get('sleep0_pingpong', {'cells': {}})['cells']
    assert sum(len(c['samples']) for c in pingpong.values()) < 4
    assert all(not c['errors'] for c in pingpong.values())


def test_an_interrupted_row_is_marked_short_of_rounds(tmp_path):
    # Ctrl-C during round 2 of the second row, after asyncio's run: minloop
    # has 1 of its 2 rounds there, asyncio 2.
    calls = []

    def measure(row, name, settings):
        calls.append((row.id, name))
        if len(calls) == 8:
            raise KeyboardInterrupt
        # Rates that drift with time: the median of the medians then lies
        # outside the range of the paired rounds' ratios (the plot's whiskers).
        return {'rate': (100.0 if name == 'asyncio' else 200.0) * 1.1 ** len(calls),
                'problems': []}

    rows = [ROWS['call_soon_chain'], ROWS['sleep0_pingpong'], ROWS['call_at_churn']]
    settings = options.Settings(False, 2, 0.0, 0.0, procs.Pinning(False))
    progress = report.Progress(runner.runs(rows, ['asyncio', 'minloop'], 2),
                               stream=io.StringIO())
    results = {}
    with pytest.raises(KeyboardInterrupt):
        runner.run_rows(rows, ['asyncio', 'minloop'], settings, progress, results, measure)
    assert list(results) == ['call_soon_chain', 'sleep0_pingpong']
    table = report.table(results, ['asyncio', 'minloop'])
    assert [c[-1].isdigit() for c in table_line(table, 'call_soon_chain').split()[1:3]] \
        == [True, True]
    cells = table_line(table, 'sleep0_pingpong').split()[1:3]
    assert cells[0][-1].isdigit() and cells[1][-1] == '<'  # asyncio had its 2 rounds
    line = report.interrupted_line(results, progress.done, progress.total)
    assert 'INTERRUPTED after 7 of 12 runs' in line
    assert 'sleep0_pingpong (1 of 2)' in line and 'call_soon_chain (' not in line
    assert "'<': fewer rounds than planned" in report.notes(results, ['asyncio', 'minloop'],
                                                            settings)
    data = results['sleep0_pingpong']['cells']['minloop']
    assert (data['runs'], data['planned']) == (1, 2)
    if importlib.util.find_spec('matplotlib'):
        png = tmp_path / 'short.png'
        report.plot(str(png), results, ['asyncio', 'minloop'],
                    {'rounds': 2, 'interrupted': True})
        assert png.stat().st_size > 0


# --- the notes say what the pinning allowed ------------------------------------


def test_bench_one_shared_cpu_is_not_called_no_bottleneck():
    class Shared:
        rounds = 1
        pin = procs.Pinning()

    Shared.pin.server = Shared.pin.client = None
    Shared.pin.shared = True
    Shared.pin.describe = 'not pinned (fewer than two usable CPUs)'
    notes = report.notes({'calm-row': _net_entry(0.30)}, ['asyncio', 'minloop'], Shared)
    assert 'not the bottleneck' not in notes
    assert 'shared one CPU' in notes and 'server CPU per round trip' in notes


@pytest.mark.skipif(not hasattr(os, 'sched_setaffinity'), reason='needs sched_setaffinity')
def test_pinning_knows_when_both_processes_share_one_cpu():
    cpu = min(os.sched_getaffinity(0))
    code = ('import os; from minloop.bench import procs; '
            f'os.sched_setaffinity(0, {{{cpu}}}); p = procs.Pinning(); '
            'print(p.shared, p.server, p.client)')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ['True', 'None', 'None']


# --- memory and many-connection rows, at tiny sizes ----------------------------

TINY = options.Settings(quick=True, rounds=1, duration=0.05, warmup=0.02,
                      pin=procs.Pinning(False))


@pytest.mark.parametrize('loop_name', SMOKE_LOOPS)
def test_idle_connection_memory_row_measures_the_server(loop_name, monkeypatch):
    monkeypatch.setattr(measure, 'SETTLE', 0.05)
    row = Row('idle-tcp-c200', 'memory', 'tiny', False, kind='protocol', conns=200,
                    lower_better=True)
    answer = measure.measure_idle(row, loop_name, TINY)
    assert 'error' not in answer and 'na' not in answer, answer
    assert answer['conns'] == 200 and answer['problems'] == []
    assert answer['rss_after'] > answer['rss_before'] > 0
    # A connection costs the server something, and far less than a megabyte.
    assert 0 < answer['rate'] < 1 << 20


def test_idle_connection_rows_need_the_open_file_limit(monkeypatch):
    import resource
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard == resource.RLIM_INFINITY:
        pytest.skip('no hard limit on open files')
    row = Row('idle-tcp-huge', 'memory', 'tiny', False, kind='protocol', conns=hard)
    answer = measure.measure_idle(row, 'asyncio', TINY)
    assert 'ulimit -Hn' in answer['na']
    assert 'ulimit -Hn' in measure.measure_net(
        Row('tcp-huge', 'net', 'tiny', False, kind='protocol', conns=hard),
        'asyncio', TINY)['na']


@pytest.mark.parametrize('loop_name', SMOKE_LOOPS)
@pytest.mark.parametrize('kind,mode', [('protocol', 'echo'), ('streams', 'echo'),
                                       ('http', 'http')])
def test_many_connection_rows_run(kind, mode, loop_name):
    if mode == 'http':
        pytest.importorskip('httptools')
    # A timed window of 0.5 s: in 0.1 s, asyncio's streams server under -X
    # dev and PYTHONMALLOC=debug on a machine busy with other work (.ci/run,
    # 2026-12-06) answered no round trip at all, which the row reports as
    # an error.
    row = Row(f'{kind}-c300', 'net', 'tiny', False, kind=kind, mode=mode, conns=300,
                    min_duration=0.5)
    answer = measure.measure_net(row, loop_name, TINY)
    # No error: the load generator saw every connection answered before it
    # timed anything (the next test shows it says so when one is not).
    # The count in the timed window is the loop's speed, not a promise.
    assert 'error' not in answer and 'na' not in answer, answer
    assert answer['round_trips'] > 0
    assert answer['problems'] == []
    if answer.get('server_us') is not None:
        assert answer['server_us'] > 0
        # The user part of it, where /proc gives it: never more than the whole
        # (the part is read in clock ticks of 10 ms, the whole to the ns).
        per_trip = 1e6 / answer['round_trips']
        assert 0 <= answer['server_user_us'] <= answer['server_us'] + 2 * 0.01 * per_trip


def test_load_generator_fails_a_row_where_a_connection_gets_no_answer(monkeypatch):
    import socket
    import threading
    from minloop.bench import client
    monkeypatch.setattr(client, 'SETTLE_TIMEOUT', 0.5)
    listener = socket.create_server(('127.0.0.1', 0))
    accepted = []

    def serve():
        # Echo on the first two connections; hold the other two silent.
        for i in range(4):
            conn, _ = listener.accept()
            accepted.append(conn)
            if i < 2:
                threading.Thread(target=echo, args=(conn,), daemon=DAEMON_THREADS).start()

    def echo(conn):
        try:
            while data := conn.recv(65536):
                conn.sendall(data)
        except OSError:
            pass

    threading.Thread(target=serve, daemon=DAEMON_THREADS).start()
    try:
        with pytest.raises(client.Failed, match='2 of 4 connections got no answer'):
            client.run('127.0.0.1', listener.getsockname()[1], 'echo', conns=4, size=64,
                       depth=1, duration=0.1, warmup=0.01)
    finally:
        listener.close()
        for conn in accepted:
            conn.close()


def test_the_standard_rows_follow_one_naming_scheme():
    import re
    # The core rows keep the workload names README.md cites.
    scheme = re.compile(r'^[a-z0-9]+(-[a-z0-9]+)+$')
    for row in ROWS.values():
        if row.group != 'core':
            assert scheme.match(row.id), row.id
            assert len(row.id) <= 23, row.id  # the table's first column
        if row.conns > 16:
            assert row.id.endswith(f'-c{row.conns}'), row.id


@pytest.mark.parametrize('loop_name', SMOKE_LOOPS)
@pytest.mark.parametrize('rid', ['unix-protocol-1k-c16', 'udp-1k-s10', 'tcp-sock-1k-c16',
                                 'tcp-buffered-64k-c1', 'pipe-streams-32x1k-c16'])
def test_readme_network_rows_run(rid, loop_name):
    answer = measure.measure_net(ROWS[rid], loop_name, TINY)
    assert 'error' not in answer and 'na' not in answer, answer
    assert answer['round_trips'] > 0 and answer['problems'] == []


def test_full_profile_covers_the_readme_network_table():
    # Every row of the networking table (benchmarks/RESULTS.md, which
    # README's summary cites), under the same name.
    readme = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          'benchmarks', 'RESULTS.md')
    if not os.path.exists(readme):
        pytest.skip('no benchmarks/RESULTS.md (an installed package)')
    with open(readme) as f:
        text = f.read()
    table = text.split('\n## Networking', 1)[1].split('\n## ', 1)[0]
    ids = [line.split('|')[1].strip() for line in table.splitlines()
           if line.startswith('| ') and not line.startswith('| row')]
    assert ids
    full = {row.id for row in select_rows(None, quick=False)}
    assert set(ids) <= full, set(ids) - full


def test_a_child_killed_by_ctrl_c_interrupts_the_run_not_fails_a_round():
    # Ctrl-C in a terminal reaches the whole process group: a child may die
    # of it before the bench sees its own KeyboardInterrupt.
    # (Its SIGINT set to the default first: the tests may run where it is
    # ignored, and then the child would not die of it.)
    code = ('import os, signal; signal.signal(signal.SIGINT, signal.SIG_DFL); '
            'os.kill(os.getpid(), signal.SIGINT)')
    with pytest.raises(KeyboardInterrupt):
        procs.run_json([sys.executable, '-c', code], timeout=30)
    # Any other death is a failed round.
    answer = procs.run_json([sys.executable, '-c', 'raise SystemExit(3)'], timeout=30)
    assert answer['error'].startswith('exit status 3')


# --- README's "TLS, subprocesses, sendfile, pipes" rows (group other) ----------

MiB = 1024 * 1024
TINY_OTHER = {
    'tls': Row('tls-1k-c2', 'other', 'tiny', False, kind='tls', conns=2, size=1024),
    'spawn': Row('spawn-8-sequential', 'other', 'tiny', False, kind='spawn', n=8,
                       per='processes'),
    'spawn-at': Row('spawn-8-at4-pipes', 'other', 'tiny', False, kind='spawn', n=8,
                          at_once=4, mode='pipes', per='processes'),
    'sendfile': Row('sendfile-2m', 'other', 'tiny', False, kind='sendfile',
                          size=2 * MiB, per='MB'),
    'ospipe': Row('ospipe-2m-64k', 'other', 'tiny', False, kind='ospipe', size=2 * MiB,
                        chunk=64 * 1024, per='MiB'),
}


def test_other_rows_are_in_the_full_profile_not_in_quick():
    other = [row.id for row in ROWS.values() if row.group == 'other']
    assert other == ['tls-1k-c1', 'tls-1k-c16', 'tls-64k-c1', 'tls-64k-c16',
                     'spawn-300-sequential', 'spawn-300-at50', 'sendfile-100m',
                     'ospipe-100m-64k']
    assert set(other) <= {row.id for row in select_rows(None, quick=False)}
    assert not set(other) & {row.id for row in select_rows(None, quick=True)}
    assert [row.id for row in select_rows('other', quick=False)] == other
    units = {rid: ROWS[rid].unit for rid in other}
    assert units['tls-1k-c1'] == 'round trips/s' and units['spawn-300-at50'] == 'processes/s'
    assert units['sendfile-100m'] == 'MB/s' and units['ospipe-100m-64k'] == 'MiB/s'
    # The pipelined TCP rows keep 'pipe-': the os.pipe() row is not among them.
    assert 'ospipe-100m-64k' not in {r.id for r in select_rows('pipe', quick=False)}


def test_other_rows_shrink_with_quick_only():
    row = ROWS['sendfile-100m']
    assert other_size(row, quick=False) == 100 * MiB
    assert other_size(row, quick=True) == 20 * MiB
    assert other_size(ROWS['spawn-300-sequential'], quick=True) == 60


@pytest.mark.parametrize('loop_name', SMOKE_LOOPS)
@pytest.mark.parametrize('what', sorted(TINY_OTHER))
def test_other_rows_run(what, loop_name):
    if what == 'tls' and not sys.platform.startswith('linux'):
        pytest.skip('the TLS load generator uses select.epoll')
    settings = options.Settings(quick=False, rounds=1, duration=0.05, warmup=0.02,
                              pin=procs.Pinning(False))
    answer = measure.measure_other(TINY_OTHER[what], loop_name, settings)
    assert 'error' not in answer and 'na' not in answer, answer
    assert answer['rate'] > 0 and answer['problems'] == []
    if what == 'tls':
        assert answer['round_trips'] > 0 and answer['client_us'] > 0
    elif what.startswith('spawn'):
        assert answer['cpu_us'] > 0
    elif what == 'sendfile':
        assert answer['bytes'] == 2 * MiB and answer['how'] == 'sendfile'
    else:
        assert answer['bytes'] == 2 * MiB


def test_tls_rows_make_their_certificate_outside_a_checkout(monkeypatch, tmp_path):
    # An installed wheel has no tests/tls_certs: a throwaway pair is made.
    import shutil
    from minloop.bench import tls
    if not sys.platform.startswith('linux'):
        pytest.skip('the TLS load generator uses select.epoll')
    monkeypatch.setattr(tls, 'CHECKOUT_CERTS', str(tmp_path / 'none'))
    monkeypatch.setattr(tls, '_made', [])
    if shutil.which('openssl') is None:
        assert 'openssl' in tls.unavailable()
        return
    where, why = tls.certificates()
    assert why is None and where != tls.CHECKOUT_CERTS
    assert tls.certificates()[0] == where  # made once per process
    answer = tls.measure('minloop', 1024, 1, 0.05, 0.02, procs.Pinning(False))
    assert 'error' not in answer and 'na' not in answer, answer
    assert answer['round_trips'] > 0


def _loop_or_skip(name):
    try:
        loops.factory(name)
    except loops.Unavailable as exc:
        pytest.skip(f'{name} unavailable: {exc}')


def test_tls_row_is_na_on_rloop():
    _loop_or_skip('rloop')
    settings = options.Settings(False, 1, 0.05, 0.02, procs.Pinning(False))
    answer = measure.measure_other(TINY_OTHER['tls'], 'rloop', settings)
    assert 'NotImplementedError' in answer['na']


def test_sendfile_row_measures_uvloops_fallback():
    _loop_or_skip('uvloop')
    settings = options.Settings(False, 1, 0.05, 0.02, procs.Pinning(False))
    answer = measure.measure_other(TINY_OTHER['sendfile'], 'uvloop', settings)
    assert answer['how'] == 'read+write' and answer['rate'] > 0, answer


def test_bench_only_other_prints_the_rows_and_their_details(tmp_path):
    out = tmp_path / 'other.json'
    # --quick shrinks spawn, sendfile and ospipe to a fifth.
    # A TLS connection's handshake must fit in the timed window even on a
    # loaded machine (0.05 s gave no round trip at a load average of 6).
    proc = run_cli('bench', *BENCH_FAST, '--duration', '0.3', '--only',
                   'tls-1k-c1,spawn-300-at50,sendfile-100m,ospipe-100m-64k',
                   '--json', str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert 'other: TLS round trips/s' in proc.stdout
    for rid in ('tls-1k-c1', 'spawn-300-at50', 'sendfile-100m', 'ospipe-100m-64k'):
        row = table_line(proc.stdout, rid)
        assert 'FAILED' not in row and 'n/a' not in row and row.split()[-1].endswith('x'), row
    assert 'server CPU per round trip' in proc.stdout
    # The table fits 80 columns; the closing 'wrote <path>' is as long as the path.
    assert max(len(line) for line in proc.stdout.splitlines()
               if not line.startswith('wrote ')) <= 80
    data = json.loads(out.read_text())
    assert data['rows']['spawn-300-at50']['n'] == 60
    assert data['rows']['sendfile-100m']['n'] == 20 * MiB
    (sample,) = data['rows']['sendfile-100m']['cells']['minloop']['samples']
    assert sample['how'] == 'sendfile' and sample['bytes'] == 20 * MiB


def test_report_marks_a_sendfile_sent_with_read_and_write():
    def cell(how, cpu):
        c = {'samples': [{'rate': 100.0, 'cpu': cpu, 'how': how, 'round': 1}],
             'errors': [], 'problems': [], 'na': None}
        runner.summarise(c)
        return c

    entry = {'row': {'group': 'other', 'kind': 'sendfile', 'unit': 'MB/s'},
             'cells': {'minloop': cell('sendfile', 0.004), 'uvloop': cell('read+write', 0.02)}}
    out = report.details({'sendfile-100m': entry}, ['minloop', 'uvloop'])
    assert table_line(out, 'sendfile-100m').split()[1:] == ['4.0', '20.0', 'rw']
    assert 'rw: sent with read + write (no loop.sendfile)' in ' '.join(out.split())


BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          'benchmarks')


@pytest.mark.parametrize('script,args,rows', [
    ('pipe_throughput.py', ['--mb', '2', '--rounds', '1'], ['ospipe-2m-64k']),
    ('subprocess_spawn.py', ['--n', '6', '--concurrency', '3', '--rounds', '1'],
     ['spawn-6-sequential', 'spawn-6-at3']),
    ('sendfile_bench.py', ['--size-mb', '2', '--rounds', '1'], ['sendfile-2m']),
    ('compare.py', ['--quick', '--rounds', '1', '--only', 'call_soon_chain,timers_fire_due'],
     ['call_soon_chain', 'timers_fire_due']),
    ('udp_echo.py', ['--rounds', '1', '--n', '500', '--clients', '1,3', '--window', '2'],
     ['udp-inproc-64b-s1-w2', 'udp-inproc-64b-s3-w2']),
])
def test_benchmark_scripts_run_through_the_engine(script, args, rows):
    path = os.path.join(BENCHMARKS, script)
    if not os.path.exists(path):
        pytest.skip('no benchmarks/ (an installed package)')
    proc = subprocess.run([sys.executable, path, *args, '--loops', 'asyncio,minloop'],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for rid in rows:
        line = table_line(proc.stdout, rid)
        assert 'FAILED' not in line and line.split()[-1].endswith('x'), line


def test_run_rows_takes_a_scripts_measure_and_a_baseline_in_some_rounds():
    # benchmarks/net_compare.py's shape: its own measuring, and a column that
    # is not a loop (its C server) in rounds 1 and 3 of 4.
    seen = []

    def measure(row, name, settings):
        seen.append((row.id, name))
        rate = {'asyncio': 100.0, 'minloop': 200.0, 'c-server': 400.0}[name]
        return {'rate': rate, 'server_us': 1e6 / rate, 'problems': []}

    rows = [ROWS['tcp-protocol-1k-c1'], ROWS['udp-1k-s1']]
    names = ['asyncio', 'minloop', 'c-server']
    rounds_of = {'c-server': {1, 3}}
    settings = options.Settings(False, 4, 0.0, 0.0, procs.Pinning(False))
    total = runner.runs(rows, names, 4, rounds_of)
    progress = report.Progress(total, stream=io.StringIO())
    results = runner.run_rows(rows, names, settings, progress, {}, measure, rounds_of)
    assert total == len(seen) == progress.done == 2 * (4 + 4 + 2)
    cells = results['tcp-protocol-1k-c1']['cells']
    assert [s['round'] for s in cells['c-server']['samples']] == [1, 3]
    assert results['udp-1k-s1']['ratios'] == {'asyncio': 2.0}
    assert results['udp-1k-s1']['cpu_ratios'] == {'asyncio': 2.0}
    table = report.table(results, names)
    assert table_line(table, 'tcp-protocol-1k-c1').split() == ['tcp-protocol-1k-c1', '100',
                                                               '200', '400', '2.00x']
    # The summary: the net group, and README's TCP echo rows apart.
    text = report.summary(results, names, runner.SUMMARY_SUBSETS)
    assert '2.00x vs asyncio (2.00x by CPU) (2 rows)' in ' '.join(text.split())
    assert any(line.split()[:2] == ['tcp', 'echo'] and '(1 row)' in line
               for line in text.splitlines())


def test_run_rows_rotates_the_loops_order_each_round_when_asked():
    # benchmarks/apps.py: round r starts with the r-th loop; without rotate
    # every round runs in the given order.
    names = ['asyncio', 'minloop', 'uvloop']

    def order(rotate):
        seen = []

        def measure(row, name, settings):
            seen.append(name)
            return {'rate': 1.0, 'problems': []}

        settings = options.Settings(False, 4, 0.0, 0.0, procs.Pinning(False))
        progress = report.Progress(12, stream=io.StringIO())
        runner.run_rows([ROWS['tcp-protocol-1k-c1']], names, settings, progress, {}, measure,
                        rotate=rotate)
        return [seen[i:i + 3] for i in range(0, 12, 3)]

    assert order(False) == [names] * 4
    assert order(True) == [names, names[1:] + names[:1], names[2:] + names[:2], names]


def test_select_rows_over_a_scripts_rows_and_groups():
    rows = {rid: r for rid, r in ROWS.items() if rid.startswith(('tcp-', 'udp-'))}
    groups = {'udp': [rid for rid in rows if rid.startswith('udp-')]}
    chosen = select_rows('udp,tcp-sock-1k', False, rows, groups)
    assert [r.id for r in chosen] == ['tcp-sock-1k-c1', 'tcp-sock-1k-c16', 'udp-1k-s1',
                                      'udp-1k-s10']
    with pytest.raises(ValueError, match='no row matches'):
        select_rows('http', False, rows, groups)


def test_script_loop_names_are_checked_as_usage_errors():
    parser = options.Parser()
    command = options.Command(parser, options.Profile(1))
    assert command._parse_loops(' asyncio, minloop ', '--loops') == ['asyncio', 'minloop']
    assert command._parse_loops('', '--require') == []
    with pytest.raises(SystemExit):
        command._parse_loops('asyncio,tokio', '--loops')


# --- every entry point: the same options, --help and a tiny --only run -------

# (script, its own arguments for a tiny run, the --only it runs, the row ids)
ENTRY_POINTS = [
    ('-m minloop bench', list(BENCH_FAST), 'call_soon', ['call_soon_chain', 'call_soon_wide',
                                                         'call_soon_threadsafe']),
    ('compare.py', ['--quick', '--rounds', '1'], 'call_soon_chain', ['call_soon_chain']),
    ('tls_echo.py', ['--rounds', '1', '--duration', '0.1', '--warmup', '0.05', '--sizes',
                     '1024', '--conns', '1,2'], 'tls-1k-c2', ['tls-1k-c2']),
    ('udp_echo.py', ['--rounds', '1', '--n', '300', '--clients', '1,2'],
     'udp-inproc-64b-s2', ['udp-inproc-64b-s2']),
    ('pipe_throughput.py', ['--mb', '1', '--rounds', '1'], 'ospipe', ['ospipe-1m-64k']),
    ('sendfile_bench.py', ['--size-mb', '1', '--rounds', '1'], 'sendfile',
     ['sendfile-1m']),
    ('subprocess_spawn.py', ['--n', '4', '--rounds', '1'], '*-sequential',
     ['spawn-4-sequential']),
    ('net_compare.py', ['--quick', '--rounds', '1', '--no-baseline'], 'tcp-protocol-1k-c1',
     ['tcp-protocol-1k-c1']),
]
SHARED = ('--only', '--quick', '--list', '--loops', '--require', '--rounds', '--timeout',
          '--json', '--plot')


def entry_argv(script):
    if script.startswith('-m '):
        return [sys.executable, *script.split()]
    path = os.path.join(BENCHMARKS, script)
    if not os.path.exists(path):
        pytest.skip('no benchmarks/ (an installed package)')
    return [sys.executable, path]


@pytest.mark.parametrize('script', [e[0] for e in ENTRY_POINTS] + ['server_instructions.py'])
def test_entry_point_help_names_the_shared_options(script):
    proc = subprocess.run([*entry_argv(script), '--help'], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    if script == 'server_instructions.py':  # one server under callgrind: no rows
        assert '--loop' in proc.stdout and 'module:factory' in proc.stdout
        return
    for option in SHARED:
        assert option in proc.stdout, option
    assert '--rows' not in proc.stdout and '--workloads' not in proc.stdout
    # One meaning of --quick everywhere.
    assert ' '.join(options.QUICK_HELP.split()) in ' '.join(proc.stdout.split())


@pytest.mark.parametrize('script,args,only,ids', ENTRY_POINTS)
def test_entry_point_runs_the_rows_only_names(script, args, only, ids, tmp_path):
    if script == 'net_compare.py':
        import shutil
        if not (sys.platform.startswith('linux') and shutil.which('gcc')):
            pytest.skip('net_compare.py needs Linux and gcc')
    if script == 'tls_echo.py' and not sys.platform.startswith('linux'):
        pytest.skip('the TLS load generator uses select.epoll')
    argv = [*entry_argv(script), *args, '--loops', 'asyncio,minloop', '--only', only]
    listed = subprocess.run([*argv, '--list'], capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert [line.split()[0] for line in listed.stdout.splitlines()
            if line and not line.startswith((' ', '*'))] == ids
    out = tmp_path / 'run.json'
    proc = subprocess.run([*argv, '--json', str(out)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert list(json.loads(out.read_text())['rows']) == ids
    for rid in ids:
        line = table_line(proc.stdout, rid)
        assert 'FAILED' not in line and line.split()[-1].endswith('x'), line


@pytest.mark.parametrize('script', ['-m minloop bench', 'compare.py', 'udp_echo.py'])
def test_entry_point_usage_errors_are_one_line(script):
    proc = subprocess.run([*entry_argv(script), '--quik'], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and proc.stdout == ''
    (line,) = proc.stderr.splitlines()
    assert 'unrecognized arguments: --quik' in line and 'did you mean --quick?' in line
    proc = subprocess.run([*entry_argv(script), '--only', 'nosuchrow,call_son_chain'],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    (line,) = proc.stderr.splitlines()
    assert "no row matches 'nosuchrow'" in line and '--list' in line


def test_only_names_the_unknown_item_and_its_close_matches():
    with pytest.raises(ValueError) as info:
        select_rows('call_soon_chain,tcp-protcol-1k-c16', False)
    text = str(info.value)
    assert "'tcp-protcol-1k-c16'" in text and 'tcp-protocol-1k-c16' in text
    assert 'call_at_churn' not in text and len(text) < 160  # not every row id
    with pytest.raises(ValueError, match='did you mean .*tcp-streams-1k-c1'):
        select_rows('streams', False)


def test_renamed_row_selectors_say_their_new_name():
    for script, old in (('compare.py', '--workloads'), ('net_compare.py', '--rows')):
        proc = subprocess.run([*entry_argv(script), old, 'x'], capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 2 and f'{old} is now --only' in proc.stderr


def test_quick_is_one_profile_with_its_rows():
    quick = [row.id for row in select_rows(None, quick=True)]
    assert quick == ['call_soon_chain', 'call_later_cancel', 'sleep0_pingpong',
                     'msgs-protocol-16x1k-c16', 'msgs-streams-16x1k-c16', 'http-pipe8-c16']
    parser = options.Parser()
    command = options.Command(parser, options.Profile(5, 1.0, 0.2))
    settings = command.settings(parser.parse_args(['--quick']), procs.Pinning(False))
    assert (settings.rounds, settings.duration, settings.warmup) == (
        options.QUICK.rounds, options.QUICK.duration, options.QUICK.warmup)
    settings = command.settings(parser.parse_args([]), procs.Pinning(False))
    assert (settings.rounds, settings.duration, settings.warmup) == (5, 1.0, 0.2)


# --- --loops: known names, module:factory, label=module:factory ---------------


def test_loops_takes_module_factory_and_labels(monkeypatch):
    monkeypatch.delenv(loops.ENV, raising=False)
    assert loops.parse('asyncio') == 'asyncio'
    assert loops.parse('asyncio:SelectorEventLoop') == 'asyncio:SelectorEventLoop'
    assert loops.parse('sel=asyncio:SelectorEventLoop') == 'sel'
    assert loops.is_loop('sel') and not loops.is_loop('c-server')
    make = loops.factory('sel')
    assert make is __import__('asyncio').SelectorEventLoop
    for bad in ('tokio', 'x=nodots', 'a b=asyncio:X', 'uvloop=asyncio:SelectorEventLoop'):
        with pytest.raises(ValueError):
            loops.parse(bad)
    with pytest.raises(loops.Unavailable, match='AttributeError'):
        loops.factory(loops.parse('asyncio:NoSuchLoop'))
    assert loops.KNOWN['talyn'].factory == 'talyn:Loop'
    assert {'zuvloop', 'rsloop', 'talyn'} <= set(loops.NAMES)


def test_a_loop_from_another_tree_runs_its_children_there(monkeypatch, tmp_path):
    # label=module:factory@DIR: the loop's children import from DIR (a
    # source tree built in place), not from this package's root.
    monkeypatch.delenv(loops.ENV, raising=False)
    assert loops.parse(f'other=minloop:new_event_loop@{tmp_path}') == 'other'
    assert loops.spec_of('other') == 'minloop:new_event_loop'
    assert loops.root_of('other') == str(tmp_path)
    assert loops.root_of('minloop') is None and loops.root_of('asyncio') is None
    argv = procs.module_command('minloop.bench.child', 'x', root=loops.root_of('other'))
    assert argv[3] == str(tmp_path)
    for bad in (f'minloop:new_event_loop@{tmp_path}',          # no label
                f'minloop=minloop:new_event_loop@{tmp_path}',  # a known name
                f'x=minloop:new_event_loop@{tmp_path / "none"}',
                'x=minloop:new_event_loop@', 'x=minloop:new_event_loop@a,b'):
        with pytest.raises(ValueError):
            loops.parse(bad)


def test_a_loop_not_installed_is_skipped_with_one_line_saying_why(monkeypatch):
    monkeypatch.setitem(loops.KNOWN, 'nosuchloop',
                        loops.Known('nosuchloop_pkg:new_event_loop', 'nosuchloop-dist',
                                    '3.99+'))
    with pytest.raises(loops.Unavailable) as info:
        loops.factory('nosuchloop')
    assert str(info.value) == 'not installed (pip install nosuchloop-dist; Python 3.99+ only)'
    # The header's line for it fits 80 columns, for the longest known name too.
    line = f"skipped: talyn: {loops._why_missing('talyn', ImportError(name='talyn'))}"
    assert len(line) <= 80, line


def test_bench_runs_a_loop_given_as_module_factory():
    proc = run_cli('bench', *BENCH_FAST[:-2], '--only', 'call_soon_chain', '--loops',
                   'minloop,sel=asyncio:SelectorEventLoop,nope=no_such_module:make')
    assert proc.returncode == 0, proc.stderr
    assert table_line(proc.stdout, 'row').split() == ['row', 'minloop', 'sel', 'sel']
    skipped = [line for line in proc.stdout.splitlines() if line.startswith('skipped:')]
    assert skipped == ["skipped: nope: ModuleNotFoundError: No module named "
                       "'no_such_module'"]
    assert table_line(proc.stdout, 'call_soon_chain').split()[-1].endswith('x')


# --- stdout closed early, as by `| head -1` -----------------------------------


@pytest.mark.parametrize('args', [['bench', '--list'], ['info'], ['bench', '--help']])
def test_a_closed_stdout_ends_quietly(args):
    # The reading end is closed before the command writes a byte: every
    # write fails, as after `| head -0`.
    r, w = os.pipe()
    os.close(r)
    try:
        proc = subprocess.run([sys.executable, '-m', 'minloop', *args], stdout=w,
                              stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(w)
    assert proc.stderr == ''
    # As a tool killed by SIGPIPE; argparse's --help ignores the failed
    # write on some versions (3.11), then exits 0 as usual.
    assert proc.returncode == 128 + 13 or ('--help' in args and proc.returncode == 0)


@pytest.mark.parametrize('script', [e[0] for e in ENTRY_POINTS[1:]])
def test_a_scripts_list_to_a_closed_stdout_ends_quietly(script):
    r, w = os.pipe()
    os.close(r)
    try:
        proc = subprocess.run([*entry_argv(script), '--list'], stdout=w,
                              stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(w)
    assert proc.stderr == '' and proc.returncode == 128 + 13


def test_a_broken_pipe_that_is_not_stdout_is_still_an_error():
    def fails():
        raise BrokenPipeError(32, 'Broken pipe')
    with pytest.raises(BrokenPipeError):
        options.quiet_on_broken_pipe(fails)


def test_summary_names_the_pipelined_rows_apart():
    # --quick's network rows are pipelined (many messages in flight per
    # connection), whose ratios run far above README's TCP echo table: the
    # summary names them so, not "net", and says which line README's is.
    def measure(row, name, settings):
        rate = {'asyncio': 100.0, 'minloop': 900.0 if row.depth > 1 else 150.0}[name]
        return {'rate': rate, 'server_us': 1e6 / rate, 'problems': []}

    quick_net = [r for r in ROWS.values() if r.quick and r.group == 'net']
    assert quick_net and all(r.depth > 1 for r in quick_net)
    rows = quick_net + [ROWS['tcp-protocol-1k-c1']]
    names = ['asyncio', 'minloop']
    settings = options.Settings(False, 1, 0.0, 0.0, procs.Pinning(False))
    progress = report.Progress(runner.runs(rows, names, 1, {}), stream=io.StringIO())
    results = runner.run_rows(rows, names, settings, progress, {}, measure, {})
    text = report.summary(results, names, runner.SUMMARY_SUBSETS)
    lines = {line.split()[0]: ' '.join(line.split()) for line in text.splitlines()
             if line.startswith('  ')}
    assert lines['net'].endswith('1.50x vs asyncio (1.50x by CPU) (1 row)'), text
    rated = [r for r in quick_net if results.get(r.id, {}).get('ratios')]  # (httptools)
    assert len(rated) >= 2
    assert lines['pipelined'].endswith(f'9.00x vs asyncio (9.00x by CPU) '
                                       f'({len(rated)} rows)'), text
    assert "README's TCP echo figure is a full run's 'tcp echo' line" in ' '.join(text.split())
    # README's --quick line says the same.
    readme = os.path.join(os.path.dirname(BENCHMARKS), 'README.md')
    if os.path.exists(readme):
        with open(readme) as f:
            setup = f.read().split('## Set up', 1)[1].split('\n## ', 1)[0]
        assert 'pipelined' in setup
