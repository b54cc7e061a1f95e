"""The release's files: the license and the metadata that names it, the
bench extra's floors, and scripts/check-wheel-contents, which .ci/run (via
scripts/wheel-check) and the GitHub workflow run on every sdist and wheel
they build (LICENSE in it, compiled modules stripped)."""

import importlib.machinery
import importlib.util
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile

import pytest

import minloop.loop

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = None


def _pyproject():
    if tomllib is None:
        pytest.skip("tomllib is new in Python 3.11")
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)


def _checker():
    path = os.path.join(ROOT, "scripts", "check-wheel-contents")
    loader = importlib.machinery.SourceFileLoader("check_wheel_contents", path)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_license_file():
    with open(os.path.join(ROOT, "LICENSE"), encoding="utf-8") as f:
        text = f.read()
    assert text.startswith("MIT License\n")
    assert "Copyright (c) 2026 the minloop authors" in text


def test_license_metadata():
    project = _pyproject()["project"]
    # PEP 639: an SPDX expression, the file travelling in sdist and wheels,
    # and no license classifier beside the expression.
    assert project["license"] == "MIT"
    assert "LICENSE" in project["license-files"]
    assert not [c for c in project["classifiers"] if c.startswith("License ::")]
    with open(os.path.join(ROOT, "MANIFEST.in"), encoding="utf-8") as f:
        assert re.search(r"^include .*\bLICENSE\b", f.read(), re.M)


def test_build_requires_a_setuptools_that_reads_the_license_expression():
    requires = _pyproject()["build-system"]["requires"]
    floor = [r for r in requires if r.startswith("setuptools")]
    m = re.fullmatch(r"setuptools>=(\d+)(?:\.(\d+))?(?:\.(\d+))?", floor[0])
    assert m and tuple(int(n or 0) for n in m.groups()) >= (77, 0, 3), floor


def test_optional_dependencies_have_floors_not_pins():
    # A newer peer on a newer Python must not break README's first line.
    extras = _pyproject()["project"]["optional-dependencies"]
    pinned = [r for reqs in extras.values() for r in reqs if "==" in r]
    assert pinned == []


def _wheel(files):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buf.getvalue()


def _so_with_sections(tmp_path, debug):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None or sys.platform != "linux":
        pytest.skip("needs a C compiler making ELF")
    src = tmp_path / "m.c"
    src.write_text("int minloop_probe(int x) { return x + 1; }\n")
    out = tmp_path / ("debug.so" if debug else "stripped.so")
    args = [cc, "-shared", "-fPIC", "-o", str(out), str(src)]
    subprocess.run(args + (["-g"] if debug else ["-g0", "-s"]), check=True)
    return out.read_bytes()


@pytest.mark.parametrize("debug", [True, False])
def test_checker_tells_stripped_modules(tmp_path, debug):
    check = _checker()
    problems = check.so_problems("m.so", _so_with_sections(tmp_path, debug))
    if debug:
        assert len(problems) == 1 and ".symtab" in problems[0] and ".debug_info" in problems[0]
    else:
        assert problems == []


def test_checker_reads_minloops_own_module():
    with open(minloop.loop.__file__, "rb") as f:
        data = f.read()
    names = _checker().elf_section_names(data)
    if names is None:
        pytest.skip("not an ELF build")
    assert ".text" in names and ".dynsym" in names


def test_checker_wants_the_license_in_a_wheel(tmp_path):
    check = _checker()
    stripped = _so_with_sections(tmp_path, debug=False)
    good = {"minloop-0.1.0.dist-info/METADATA": "Name: minloop\nLicense-Expression: MIT\n",
            "minloop-0.1.0.dist-info/licenses/LICENSE": "MIT License\n",
            "minloop/loop.cpython-311-x86_64-linux-gnu.so": stripped}
    whl = tmp_path / "minloop-0.1.0-cp311-cp311-linux_x86_64.whl"
    whl.write_bytes(_wheel(good))
    assert check.wheel_problems(str(whl)) == []
    bad = dict(good)
    del bad["minloop-0.1.0.dist-info/licenses/LICENSE"]
    bad["minloop-0.1.0.dist-info/METADATA"] = "Name: minloop\nLicense: MIT\n"
    whl.write_bytes(_wheel(bad))
    problems = check.wheel_problems(str(whl))
    assert len(problems) == 2 and "licenses/LICENSE" in problems[0]


def test_checker_wants_the_license_in_an_sdist(tmp_path):
    check = _checker()

    def sdist(files):
        path = tmp_path / "minloop-0.1.0.tar.gz"
        with tarfile.open(path, "w:gz") as t:
            for name, text in files.items():
                data = text.encode()
                info = tarfile.TarInfo(f"minloop-0.1.0/{name}")
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
        return str(path)

    info = "Name: minloop\nLicense-Expression: MIT\n"
    assert check.sdist_problems(sdist({"PKG-INFO": info, "LICENSE": "MIT License\n"})) == []
    assert check.sdist_problems(sdist({"PKG-INFO": info})) == ["no minloop-0.1.0/LICENSE"]


# The wheels are manylinux_2_17: a glibc symbol versioned above 2.17 in a
# compiled module makes auditwheel tag the wheel for a newer glibc (the
# stall watchdog's pthread_condattr_setclock, GLIBC_2.34, and the telemetry
# page's fcntl, fcntl64@GLIBC_2.28 under Python's _FILE_OFFSET_BITS=64, did
# so; .ci/run's wheel check found both, 15 minutes in).  Checked here on
# the build under test, in seconds.
MANYLINUX_GLIBC = (2, 17)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc symbols: Linux only")
@pytest.mark.skipif(shutil.which("objdump") is None, reason="objdump not installed (binutils)")
def test_compiled_modules_need_no_glibc_newer_than_manylinux_2_17():
    package = os.path.dirname(minloop.loop.__file__)
    modules = [os.path.join(package, name) for name in sorted(os.listdir(package))
               if name.endswith(".so")]
    assert modules
    newer = []
    for path in modules:
        out = subprocess.run(["objdump", "-T", path], capture_output=True, text=True,
                             check=True).stdout
        for line in out.splitlines():
            m = re.search(r"\bGLIBC_(\d+)\.(\d+)\S*\s+(\S+)$", line)
            if m and (int(m.group(1)), int(m.group(2))) > MANYLINUX_GLIBC:
                newer.append(f"{os.path.basename(path)}: {m.group(3)} "
                             f"(GLIBC_{m.group(1)}.{m.group(2)})")
    assert not newer, newer


@pytest.mark.timeout(300)   # a collection of the whole suite, beside other workers
@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="README counts on Python 3.11")
def test_readme_counts_the_core_tests_it_says():
    # README's "Running the tests" says how many core tests there are, on
    # 3.11: within a tenth of what pytest collects, or it misleads.
    readme = os.path.join(ROOT, "README.md")
    if not os.path.exists(readme):
        pytest.skip("no README.md (an installed copy of the tests)")
    with open(readme) as f:
        said = re.search(r"about ([\d,]+) core tests", f.read())
    assert said, "README no longer says how many core tests there are"
    said = int(said.group(1).replace(",", ""))
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         os.path.join(ROOT, "tests"), "--ignore", os.path.join(ROOT, "tests", "conformance")],
        capture_output=True, text=True, cwd=ROOT, timeout=600).stdout
    collected = int(re.search(r"(\d+) tests? collected", out).group(1))
    assert abs(collected - said) <= collected / 10, (said, collected)
