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
    try:
        # the first mesh's candidates (each remat x each strategy), the mesh counted done, as in one
        # process, when the next is read
        first = [next(got) for _ in range(len(search.remats) * len(search.strategies_of(*search.meshes[0])))]
        assert search.meshes_done == 0 and {c.mesh for c in first} == {str(search.meshes[0][1])}
        second = next(got)
        assert search.meshes_done == 1 and second.mesh == str(search.meshes[1][1])
    finally:
        got.close()  # a time limit or Ctrl-C: the caller stops reading
    assert not multiprocessing.active_children()


def test_a_worker_s_error_is_the_parent_s(monkeypatch):
    def broken(*args, **kwargs):  # forked workers inherit the patch
        raise ConfigError("is broken on purpose", key_path="mesh", value=str(kwargs["mesh"]))

    monkeypatch.setattr(mesh_search, "simulate_mesh", broken)
    with pytest.raises(ConfigError, match="broken on purpose"):
        list(Search(*SMALL).candidates(jobs=2))
    assert not multiprocessing.active_children()


def test_the_workers_share_the_plans_memory_bound(monkeypatch):
    # a bound of 8 plans: one process drops none of 5 held, each of two workers keeps 8 // 2 = 4
    monkeypatch.setattr(mesh_search, "max_schedules", lambda devices: 8)
    monkeypatch.setattr(mesh_search, "cached_plans", lambda: 5)
    drops = []
    monkeypatch.setattr(mesh_search, "drop_schedules", lambda: drops.append(1))
    search = Search(*SMALL)
    start, stop = search.parts()[-1]
    list(search._run(start, stop))
    assert drops == []
    search.workers = 2
    list(search._run(start, stop))
    assert len(drops) == stop - start  # before each mesh
    pooled = Search(*SMALL)
    got = pooled.candidates(jobs=2)
    next(got)
    assert pooled.workers == 2
    got.close()
    assert pooled.workers == 1
