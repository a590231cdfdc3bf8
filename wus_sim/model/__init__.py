"""What is trained: workloads (tensors, FLOPs, activations) and their files, compute time on
one core, per-replica memory, and the calibrated compute parameters; :mod:`.importers` builds
workload files from Hugging Face configs."""
