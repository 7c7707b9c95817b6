"""Tracing MPI applications for SimGrid: a PMPI library in C (``pmpi_trace.c``) preloaded into
every rank writes SimGrid time-independent traces (``build`` compiles it with the target MPI's
own compiler wrapper, ``command`` is ``haloflow trace``, ``files`` reads what it wrote,
``timeline`` turns a replay's timed trace into a timeline for Perfetto)."""


class TraceError(ValueError):
    """A missing tool or a bad trace; the message says which and what to do (exit code 2)."""
