"""A search run in worker processes (``Search.candidates(jobs=N)``)
gives what one process gives, in the same order; a part is a run of meshes of one tensor size;
stopping early or an error in a worker leaves no worker behind."""

import multiprocessing

import pytest

from wus_sim.inputs.errors import ConfigError
from wus_sim.inputs.strict_json import dumps_strict
from wus_sim.training.parallelism import mesh_search
from wus_sim.training.parallelism.mesh_search import Search

SMALL = ("llama3-8b", "torus:2x4")
"""8 chips: tensor sizes 1, 2, 4 and 8, so four parts (a few seconds in all)."""


def rows(candidates):
    return [dumps_strict(c.to_dict()) for c in candidates]


def test_worker_processes_give_one_process_s_candidates_in_its_order():
    one = Search(*SMALL)
    alone = rows(one.candidates(jobs=1))
    two = Search(*SMALL)
    pooled = rows(two.candidates(jobs=2))
    assert pooled == alone and len(alone) == two.size
    assert two.meshes_done == len(two.meshes) == one.meshes_done
    assert not multiprocessing.active_children()


def test_a_part_is_a_run_of_one_tensor_size():
    search = Search(*SMALL)
    parts = search.parts()
    tensors = [m.tensor for _, m in search.meshes]
    # by hand: the meshes come grouped by tensor size (factorisations' order), 4 sizes of 8 chips
    assert [tensors[a] for a, _ in parts] == [1, 2, 4, 8]
    assert parts[0][0] == 0 and parts[-1][1] == len(search.meshes)
    assert all(b == c for (_, b), (c, _) in zip(parts, parts[1:]))
    assert all(len({tensors[i] for i in range(a, b)}) == 1 for a, b in parts)


def test_stopping_early_stops_the_workers():
    search = Search(*SMALL)
    got = search.candidates(jobs=2)
    first = [next(got) for _ in range(3)]
    got.close()  # a time limit or Ctrl-C: the caller stops reading
    assert len(first) == 3 and not multiprocessing.active_children()


def test_a_worker_s_error_is_the_parent_s(monkeypatch):
    def broken(*args, **kwargs):  # forked workers inherit the patch
        raise ConfigError("is broken on purpose", key_path="mesh", value=str(kwargs["mesh"]))

    monkeypatch.setattr(mesh_search, "simulate_mesh", broken)
    with pytest.raises(ConfigError, match="broken on purpose"):
        list(Search(*SMALL).candidates(jobs=2))
    assert not multiprocessing.active_children()
