"""How a rank loads numba: its kernels from the cache, without LLVM's compiler.

A run whose kernels are all in numba's cache (``cache=True``) needs no compiler, yet numba
starts one in every process.  On the 2³ cavity a rank's peak resident set was 189 MB, and
three of numba's habits made about 50 MB of it (docs/performance.md, "Memory"):

- **Its runtime is compiled at every start.**  numba's NRT functions (reference counts, the
  atomic operations) are built from LLVM IR in each process, and running LLVM's optimiser and
  code generator once maps some 30 MB of libLLVM's code.  Here their object code is cached
  beside the kernels', keyed by the numba and llvmlite versions and the CPU, and loaded as a
  cached kernel is.
- **A cache load installs every lowering registry first** (numpy's, the typed containers',
  the random generators'...), which only a compile reads.  Here a load starts the runtime
  and nothing else; a compile still installs them, since the compiler does so itself.
- **A loaded kernel keeps its LLVM IR**, parsed from the cache, for a later compile that
  would link it in (the compiled pressure solve's is 0.9 MB of bitcode, ~10 MB parsed).
  Here the bitcode stays bytes until such a compile asks for it.  The symbols the JIT must
  know are read from the object code's ELF symbol table instead.

The registries also load with SciPy's BLAS hidden: numba's check for it imports the whole of
scipy.linalg (13 MB) for a BLAS no haloflow kernel calls.  numba then takes its own loop for
a 1-D ``np.dot`` and imports the BLAS, as before, where a kernel needs more (``ensure_blas``).

Each change replaces a piece of numba's internals, so :func:`install` makes none of them
where numba's internals are not those this was written against (numba 0.68): numba then
loads as it always has.
"""

from __future__ import annotations

import hashlib
import os
import struct
import sys
from pathlib import Path

MAGIC = b"haloflow numba runtime 1\n"
ELF_SECTION = struct.Struct("<IIQQQQIIQQ")  # Elf64_Shdr
ELF_SYMBOL = struct.Struct("<IBBHQQ")  # Elf64_Sym
SHT_SYMTAB = 2

_installed = False


def install() -> None:
    """Make numba's CPU target load kernels as described above; do nothing where its
    internals are not the expected ones, or a second time.  Call it before the process's
    first kernel: a runtime already compiled stays as it is."""
    global _installed
    if _installed:
        return
    _installed = True
    try:
        from numba.core import caching, codegen, cpu
        from numba.core.runtime import nrt, nrtdynmod
    except ImportError:
        return
    needed = ((nrtdynmod, "compile_nrt_functions"), (nrtdynmod, "create_nrt_module"),
              (caching.Cache, "load_overload"), (caching.Cache, "_load_overload"),
              (cpu.CPUContext, "load_additional_registries"), (nrt.rtsys, "initialize"),
              (codegen.JITCPUCodegen, "_library_class"), (codegen.CPUCodeLibrary, "_unserialize"),
              (codegen.CPUCodeLibrary, "_get_module_for_linking"))
    if not all(hasattr(owner, name) for owner, name in needed):
        return
    nrtdynmod.compile_nrt_functions = _cached_runtime
    caching.Cache.load_overload = _load_without_registries(caching.Cache.load_overload)
    cpu.CPUContext.load_additional_registries = _without_blas(
        cpu.CPUContext.load_additional_registries)
    codegen.JITCPUCodegen._library_class = _lean_library(codegen.JITCPUCodegen._library_class)


def _cached_runtime(ctx):
    """numba's ``compile_nrt_functions``, from a cache of its object code where one fits."""
    import llvmlite
    import numba
    from numba.core import config
    from numba.core.runtime import nrtdynmod

    codegen = ctx.codegen()
    key = repr((numba.__version__, llvmlite.__version__, codegen.magic_tuple(), config.OPT,
                config.MACHINE_BITS, config.DEBUG_NRT, config.DEBUG_NRT_STACK_LIMIT)).encode()
    path = _runtime_cache_dir() / f"nrt-{hashlib.sha256(key).hexdigest()[:20]}.bin"
    data = _read_runtime(path, key)
    if data is not None:
        return codegen.unserialize_library(("nrt", "object", data))
    ir_module, library = nrtdynmod.create_nrt_module(ctx)
    library.enable_object_caching()
    library.add_ir_module(ir_module)
    library.finalize()
    _, _, (obj, bitcode) = library.serialize_using_object_code()
    _write_runtime(path, key, obj, bitcode)
    return library


def _runtime_cache_dir() -> Path:
    """Where numba caches this package's kernels: NUMBA_CACHE_DIR, else ``__pycache__``."""
    from numba.core import config

    return Path(config.CACHE_DIR) if config.CACHE_DIR else Path(__file__).parent / "__pycache__"


def _read_runtime(path: Path, key: bytes):
    """(object code, bitcode) from ``path`` if it holds the runtime for ``key``, else None."""
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    head, sep, body = blob.partition(b"\n\n")
    fields = head.split(b"\n")
    if not sep or len(fields) != 4 or fields[0] + b"\n" != MAGIC or fields[1] != key:
        return None
    try:
        n_obj, n_bitcode = int(fields[2]), int(fields[3])
    except ValueError:
        return None
    if n_obj <= 0 or n_bitcode <= 0 or n_obj + n_bitcode != len(body):
        return None
    return body[:n_obj], body[n_obj:]


def _write_runtime(path: Path, key: bytes, obj: bytes, bitcode: bytes) -> None:
    """Write atomically, so ranks starting together never read half a file; a cache
    directory that cannot be written just means compiling again next time."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(b"".join((MAGIC, key, b"\n%d\n%d\n\n" % (len(obj), len(bitcode)),
                                  obj, bitcode)))
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)


def _load_without_registries(load_overload):
    """numba's cache load, starting the CPU target's runtime instead of refreshing all its
    registries; other targets (CUDA) load as before."""
    from numba.core.cpu import CPUContext
    from numba.core.runtime.nrt import rtsys

    def load(self, sig, target_context):
        if not isinstance(target_context, CPUContext):
            return load_overload(self, sig, target_context)
        rtsys.initialize(target_context)
        with self._guard_against_spurious_io_errors():
            return self._load_overload(sig, target_context)

    return load


def _without_blas(load_additional_registries):
    """The registries' loading with SciPy's BLAS hidden from numba's check for it."""

    def load(self):
        blas = "scipy.linalg.cython_blas"
        if blas in sys.modules or "numba.np.arraymath" in sys.modules:
            return load_additional_registries(self)
        sys.modules[blas] = None  # an import of it now raises ImportError
        try:
            return load_additional_registries(self)
        finally:
            del sys.modules[blas]

    return load


def _lean_library(base):
    """numba's JIT code library whose cached kernels keep their bitcode as bytes."""
    import llvmlite.binding as ll

    class LeanCodeLibrary(base):
        _bitcode = None
        _linkable = None

        @property
        def _shared_module(self):
            """The IR that a compile links in, parsed the first time one asks."""
            if self._linkable is None and self._bitcode is not None:
                self._linkable, self._bitcode = ll.parse_bitcode(self._bitcode), None
            return self._linkable

        @_shared_module.setter
        def _shared_module(self, module):
            self._linkable = module

        @classmethod
        def _unserialize(cls, codegen, state):
            name, kind, data = state
            if kind != "object":
                return super()._unserialize(codegen, state)
            obj, bitcode = data
            names = elf_defined_symbols(obj)
            known = getattr(codegen._engine, "_defined_symbols", None)
            if names is None or not isinstance(known, set):
                return super()._unserialize(codegen, state)
            self = codegen.create_library(name)
            self.enable_object_caching()
            self._set_compiled_object(obj)
            self._bitcode = bitcode
            self._finalize_final_module()
            known |= names
            return self

    return LeanCodeLibrary


def elf_defined_symbols(obj: bytes) -> set[str] | None:
    """Names of the symbols a 64-bit little-endian ELF object defines; None for any other
    object format (numba then parses the IR for them, as it always did)."""
    if len(obj) < 64 or obj[:4] != b"\x7fELF" or obj[4] != 2 or obj[5] != 1:
        return None
    try:
        return _symbols(obj)
    except (struct.error, ValueError, IndexError, UnicodeDecodeError):
        return None  # not an object numba wrote: let numba read it


def _symbols(obj: bytes) -> set[str]:
    (shoff,) = struct.unpack_from("<Q", obj, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", obj, 0x3A)
    if shentsize != ELF_SECTION.size or shoff + shnum * shentsize > len(obj):
        raise ValueError("section headers out of the object")
    names = set()
    for i in range(shnum):
        sh_type, offset, size, link = _section(obj, shoff + i * shentsize)
        if sh_type != SHT_SYMTAB:
            continue
        if link >= shnum:
            raise ValueError("symbol names in no section")
        strings = _section(obj, shoff + link * shentsize)[1]
        for name, _, _, shndx, _, _ in ELF_SYMBOL.iter_unpack(obj[offset:offset + size]):
            if shndx != 0 and name:  # defined (not SHN_UNDEF) and named
                start = strings + name
                names.add(obj[start:obj.index(b"\0", start)].decode())
    return names


def _section(obj: bytes, at: int) -> tuple[int, int, int, int]:
    """(type, offset, size, link) of the section header at byte ``at``."""
    _, sh_type, _, _, offset, size, link, _, _, _ = ELF_SECTION.unpack_from(obj, at)
    return sh_type, offset, size, link
