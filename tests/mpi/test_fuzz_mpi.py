"""Fuzz reproducers on two ranks (issue 16): a mesh rank 0 reads and refuses stops every rank
with the same one-line error and exit 2, quickly, instead of failing on one rank mid-solve."""

from __future__ import annotations

import shutil

import pytest

from tests.unit.test_mesh_io import CASE, FOAM


def _owner_out_of_range(tmp_path):
    """The ASCII box with the owner of its last face one past the 12 cells."""
    mesh = tmp_path / "mesh"
    shutil.copytree(FOAM["ascii"], mesh)
    owner = mesh / "constant" / "polyMesh" / "owner"
    text = owner.read_text()
    a = text.index("\n55\n(") + len("\n55\n(")
    b = text.index(")", a)
    items = text[a:b].split()
    items[-1] = "12"
    owner.write_text(text[:a] + "\n" + "\n".join(items) + "\n" + text[b:])
    case = tmp_path / "c.toml"
    case.write_text(CASE.format(file=mesh))
    return case


@pytest.mark.parallel(ranks=[2], timeout=90)
def test_out_of_range_owner_ends_every_rank_with_exit_2(tmp_path, capsys, nranks):
    from mpi4py import MPI

    from haloflow.cli import main as cli_main

    case = _owner_out_of_range(tmp_path)  # every rank its own copy: same content
    with pytest.raises(SystemExit) as e:
        cli_main(["run", str(case), "-o", str(tmp_path / "out"), "--steps", "2", "--quiet"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    if MPI.COMM_WORLD.rank == 0:
        assert err.count("\n") == 1 and "mesh is broken" in err, err
        assert "fewer than 4 faces" in err
    else:
        assert err == ""
