"""Micro-benchmarks: the network (netpipe) and halo exchanges on real solver traffic."""
