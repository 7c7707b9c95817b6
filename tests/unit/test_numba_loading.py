"""A rank loads its kernels from numba's cache without LLVM's compiler: the runtime's object
code comes from a cache of its own, a load installs no lowering registry, and a cached kernel's
IR stays bitcode until a compile links it in, after which the compile's answer is right.  Each
check runs in fresh processes, since what numba has loaded is process-wide."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from haloflow.backends import numba_loading

KERNELS = """
import numba as nb
import numpy as np

@nb.njit(cache=True)
def scaled(x, a):
    out = np.empty_like(x)  # an allocation: the runtime's
    for i in range(len(x)):
        out[i] = a * x[i]
    return out

@nb.njit(cache=True)
def total(x):
    y = scaled(x, 2.0)
    s = 0.0
    for i in range(len(y)):  # y.sum() would import numba's numpy lowering when loaded
        s += y[i]
    return s
"""

PROBE = """
import json, sys
from haloflow.backends import numba_loading
numba_loading.install()
loaded = set()
read_symbols = numba_loading.elf_defined_symbols
def spy(obj):  # what the loads told the JIT
    names = read_symbols(obj)
    loaded.update(names or ())
    return names
numba_loading.elf_defined_symbols = spy
import llvmlite.binding as ll
import numba as nb
import numpy as np
from numba.core.runtime.nrt import rtsys
import kernels

out = {"total": float(kernels.total(np.arange(5.0)))}
runtime = rtsys.library
(lib,) = [c.library for c in kernels.total.overloads.values()]
out["runtime_loaded"] = runtime._bitcode is not None
out["kernel_ir_unparsed"] = lib._bitcode is not None
out["registries"] = "numba.np.arraymath" in sys.modules
ir = lib._get_module_for_linking()  # parsed here if it was not
local = (ll.Linkage.private, ll.Linkage.internal)
defined = {f.name for f in ir.functions if not f.is_declaration and f.linkage not in local}
out["ir_symbols_known"] = bool(defined) and defined <= loaded

@nb.njit
def again(x):  # a compile that links the cached kernel in
    return kernels.scaled(x, 3.0)[4]

out["again"] = again(np.arange(5.0))
out["registries_after_compile"] = "numba.np.arraymath" in sys.modules
print(json.dumps(out))
"""


def _probe(tmp_path, cache) -> dict:
    (tmp_path / "kernels.py").write_text(KERNELS)
    (tmp_path / "probe.py").write_text(PROBE)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "PYTHONPATH": str(tmp_path)}
    done = subprocess.run([sys.executable, str(tmp_path / "probe.py")], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_warm_cache_loads_the_runtime_and_kernels_without_compiling(tmp_path):
    cache = tmp_path / "cache"
    cold = _probe(tmp_path, cache)
    assert cold["total"] == 20.0 and cold["again"] == 12.0
    assert not cold["runtime_loaded"] and not cold["ir_symbols_known"]  # compiled, then cached
    assert len(list(cache.glob("src-*/nrt-*.bin"))) == 1
    warm = _probe(tmp_path, cache)
    assert warm["total"] == 20.0
    assert warm["runtime_loaded"] and warm["kernel_ir_unparsed"]
    assert not warm["registries"]
    assert warm["ir_symbols_known"]  # read from the object, as from the IR
    # a compile after the lean loads links their IR in, with every registry installed
    assert warm["again"] == 12.0 and warm["registries_after_compile"]


def test_a_damaged_runtime_cache_is_compiled_again_and_replaced(tmp_path):
    cache = tmp_path / "cache"
    _probe(tmp_path, cache)
    (path,) = cache.glob("src-*/nrt-*.bin")
    good = path.read_bytes()
    another_version = good.replace(b"numba runtime 1", b"numba runtime 9")
    for damaged in (good[: len(good) // 2], b"", another_version):
        path.write_bytes(damaged)
        run = _probe(tmp_path, cache)
        assert run["total"] == 20.0 and run["again"] == 12.0
        assert not run["runtime_loaded"]
        assert path.read_bytes() == good


def test_numba_stays_as_it_is_where_its_internals_differ(tmp_path):
    script = textwrap.dedent("""
        from numba.core.runtime import nrtdynmod
        original = nrtdynmod.compile_nrt_functions
        del nrtdynmod.create_nrt_module
        from haloflow.backends import numba_loading
        numba_loading.install()
        assert nrtdynmod.compile_nrt_functions is original
        print("unchanged")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.strip() == "unchanged", done.stderr[-2000:]


def _elf_header(shoff: int, shentsize: int, shnum: int) -> bytearray:
    head = bytearray(b"\x7fELF\x02\x01" + bytes(58))
    head[0x28:0x30] = shoff.to_bytes(8, "little")
    head[0x3A:0x3E] = shentsize.to_bytes(2, "little") + shnum.to_bytes(2, "little")
    return head


def test_symbols_only_from_a_64_bit_little_endian_elf_object_that_holds_together():
    assert numba_loading.elf_defined_symbols(b"") is None
    assert numba_loading.elf_defined_symbols(b"\xcf\xfa\xed\xfe" + bytes(60)) is None  # Mach-O
    assert numba_loading.elf_defined_symbols(bytes(_elf_header(64, 64, 0))) == set()
    assert numba_loading.elf_defined_symbols(bytes(_elf_header(10**6, 64, 1))) is None
    assert numba_loading.elf_defined_symbols(bytes(_elf_header(64, 40, 1))) is None
    symtab_linking_nowhere = _elf_header(64, 64, 1) + bytes(64)
    symtab_linking_nowhere[64 + 4] = numba_loading.SHT_SYMTAB
    symtab_linking_nowhere[64 + 40] = 7  # sh_link: section 7 of 1
    assert numba_loading.elf_defined_symbols(bytes(symtab_linking_nowhere)) is None
