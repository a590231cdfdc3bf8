"""One training step: the sharding plan, what each update strategy does, the step's small
all-reduces, the step as SimPy processes, its trace, and the point parameters."""
