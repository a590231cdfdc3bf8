"""The machine: chips, slices (static structure), their files and link faults, the SimPy
network over a slice, and slices joined by the data-center network."""
