"""One training step: the step and its parts at the top (step, step_run, step_prefetch,
small_allreduce, speedups, bands), over four rooms: :mod:`.parameters` (the point parameters),
:mod:`.update` (the sharding plan and what each update strategy does), :mod:`.timeline` (the step
as a program, its SimPy and direct timelines, its trace) and :mod:`.parallelism` (device meshes,
tensor parallelism, the mesh search)."""
