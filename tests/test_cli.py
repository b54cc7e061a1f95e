"""python -m minloop: --version, info and run (an unmodified asyncio script
runs on minloop); bench is tested in test_bench_cli.py."""

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
    assert re.search(rf"^poller +{minloop.poller_backend_name()}( \(libkqueue's [^)]*\))?;",
                     out.stdout, re.M)
    assert re.search(r'^python +CPython ', out.stdout, re.M)


def test_info_names_the_telemetry_packages():
    # A telemetry bug report needs the exporters' packages and versions.
    from importlib import metadata
    out = run_cli('info')
    assert out.returncode == 0
    line = re.search(r'^telemetry +(.*(?:\n {13}.*)*)', out.stdout, re.M)
    assert line, out.stdout
    text = ' '.join(line.group(1).split())
    for name in ('prometheus_client', 'opentelemetry-api', 'opentelemetry-sdk'):
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
        assert f'{name} {version}' in text, out.stdout


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
