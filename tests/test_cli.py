"""python -m minloop: --version, info, run (an unmodified asyncio script
runs on minloop) and bench."""

import io
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

import minloop


def run_cli(*args, cwd=None):
    return subprocess.run([sys.executable, '-m', 'minloop', *args],
                          capture_output=True, text=True, timeout=60, cwd=cwd)


def test_version():
    out = run_cli('--version')
    assert out.returncode == 0
    assert out.stdout.strip() == f'minloop {minloop.__version__}'


def test_info_names_the_poller():
    # More of info in test_cli_run.py.
    out = run_cli('info')
    assert out.returncode == 0
    assert re.search(rf'^poller +{minloop.poller_backend_name()};', out.stdout, re.M)
    assert re.search(r'^python +CPython ', out.stdout, re.M)


SCRIPT = textwrap.dedent('''
    import asyncio
    import sys

    async def main():
        await asyncio.sleep(0.001)
        return type(asyncio.get_running_loop()).__module__

    print("asyncio.run:", asyncio.run(main()))
    loop = asyncio.new_event_loop()
    print("new_event_loop:", type(loop).__module__)
    loop.close()
    if sys.version_info >= (3, 11):
        with asyncio.Runner() as runner:
            print("Runner:", runner.run(main()))
    print("argv:", sys.argv[1:])
    print("name:", __name__)
''')


def test_run_script_uses_minloop_everywhere(tmp_path):
    script = tmp_path / 'app.py'
    script.write_text(SCRIPT)
    out = run_cli('run', str(script), '--flag', 'x')
    assert out.returncode == 0, out.stderr
    assert 'asyncio.run: minloop.base_events' in out.stdout
    assert 'new_event_loop: minloop.base_events' in out.stdout
    if sys.version_info >= (3, 11):
        assert 'Runner: minloop.base_events' in out.stdout
    assert "argv: ['--flag', 'x']" in out.stdout
    assert 'name: __main__' in out.stdout


def test_run_module(tmp_path):
    (tmp_path / 'appmod.py').write_text(SCRIPT)
    out = run_cli('run', '-m', 'appmod', 'a', cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert 'asyncio.run: minloop.base_events' in out.stdout
    assert "argv: ['a']" in out.stdout


def test_run_without_target_is_a_usage_error():
    out = run_cli('run')
    assert out.returncode == 2
    assert 'required' in out.stderr


# --- bench -------------------------------------------------------------------
# Reduced sets (one round, tiny network windows): these check that the pieces
# fit and what the command prints, never how fast anything is.

BENCH_FAST = ('--quick', '--rounds', '1', '--duration', '0.05', '--loops', 'asyncio,minloop')


def test_bench_quick_prints_the_table_and_writes_json(tmp_path):
    out = tmp_path / 'bench.json'
    proc = run_cli('bench', *BENCH_FAST, '--only', 'call_soon_chain,tcp-protocol-1k-c1',
                   '--json', str(out))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    head = next(line for line in lines if line.startswith('row '))
    assert head.split()[:4] == ['row', 'unit', 'asyncio', 'minloop']
    assert 'vs asyncio' in head and 'client CPU' in head
    for rid in ('call_soon_chain', 'tcp-protocol-1k-c1'):
        row = next(line for line in lines if line.startswith(rid + ' '))
        assert 'FAILED' not in row and row.rstrip().split()[-1] != '-', row
    assert 'load generator' in proc.stdout and 'client CPU' in proc.stdout
    assert 'runs in' in proc.stderr  # the progress report's last line

    data = json.loads(out.read_text())
    env = data['environment']
    assert env['minloop'] == minloop.__version__ and env['rounds'] == 1 and env['quick']
    assert env['loops']['minloop']['available'] and 'python' in env
    assert set(data['rows']) == {'call_soon_chain', 'tcp-protocol-1k-c1'}
    core = data['rows']['call_soon_chain']
    (sample,) = core['cells']['minloop']['samples']
    assert sample['round'] == 1 and sample['seconds'] > 0 and sample['rate'] > 0
    assert core['cells']['asyncio']['median']['rate'] > 0
    assert core['ratios']['asyncio'] > 0
    net = data['rows']['tcp-protocol-1k-c1']
    (sample,) = net['cells']['minloop']['samples']
    assert sample['round_trips'] > 0 and 0 <= sample['client_cpu']
    assert net['client_cpu_peak'] is not None and net['row']['unit'] == 'round trips/s'


def test_bench_plot_without_matplotlib_says_how_to_get_it(tmp_path):
    # A matplotlib that cannot be imported shadows any installed one.
    fake = tmp_path / 'fake' / 'matplotlib'
    fake.mkdir(parents=True)
    (fake / '__init__.py').write_text("raise ImportError('No module named matplotlib')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(tmp_path / 'fake')] + [p for p in [os.environ.get('PYTHONPATH')] if p]))
    proc = subprocess.run(
        [sys.executable, '-m', 'minloop', 'bench', *BENCH_FAST, '--only', 'call_soon_chain',
         '--plot', str(tmp_path / 'ratios.png')],
        capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode != 0
    assert 'pip install "minloop[plot]"' in proc.stderr
    assert any(line.startswith('call_soon_chain ') for line in proc.stdout.splitlines())
    assert not (tmp_path / 'ratios.png').exists()


def test_bench_row_a_loop_cannot_run_is_na_not_a_failure(tmp_path):
    # An httptools that cannot be imported: the HTTP servers cannot start.
    fake = tmp_path / 'fake' / 'httptools'
    fake.mkdir(parents=True)
    (fake / '__init__.py').write_text("raise ImportError('no httptools here')\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path / 'fake'))
    proc = subprocess.run(
        [sys.executable, '-m', 'minloop', 'bench', *BENCH_FAST, '--only', 'http-c16'],
        capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    row = next(line for line in proc.stdout.splitlines() if line.startswith('http-c16 '))
    assert row.split()[2:4] == ['n/a', 'n/a'], row
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
                'tcp-protocol-1k-c16', 'tcp-streams-1k-c16', 'http-pipe8-c16'):
        assert rid in proc.stdout


class _Stream(io.StringIO):
    def __init__(self, tty):
        super().__init__()
        self._tty = tty

    def isatty(self):
        return self._tty


@pytest.mark.parametrize('tty', [True, False])
def test_bench_progress_is_one_rewritten_line_on_a_tty(tty):
    from minloop.bench.report import Progress

    stream = _Stream(tty)
    progress = Progress(4, stream)
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


def test_bench_flags_a_saturated_load_generator():
    from minloop.bench import procs, report

    def entry(util):
        cells = {n: {'samples': [{'rate': 1.0, 'client_util': util}], 'errors': [],
                     'problems': [], 'na': None, 'spread': 0.0,
                     'median': {'rate': 1.0, 'client_util': util}}
                 for n in ('asyncio', 'minloop')}
        return {'row': {'group': 'net', 'unit': 'round trips/s'}, 'cells': cells,
                'ratios': {'asyncio': 1.0}}

    class Settings:
        rounds = 1
        pin = procs.Pinning()

    results = {'busy-row': entry(0.97), 'calm-row': entry(0.30)}
    table = report.table(results, ['asyncio', 'minloop'])
    assert next(l for l in table.splitlines() if l.startswith('busy-row')).endswith('97% sat')
    assert next(l for l in table.splitlines() if l.startswith('calm-row')).endswith('30%')
    notes = report.notes(results, ['asyncio', 'minloop'], Settings)
    assert 'busy-row (97%' in notes and 'not the bottleneck' not in notes
    results = {'calm-row': entry(0.30)}
    assert 'not the bottleneck' in report.notes(results, ['asyncio', 'minloop'], Settings)
